"""The local stack: moto-backed AWS, in-process Lambda handlers, and a one-port gateway."""
