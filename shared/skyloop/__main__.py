import sys

from skyloop.cli import main

sys.exit(main())
