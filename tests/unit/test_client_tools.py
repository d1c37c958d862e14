"""Unit tests for skyloop.client_tools: the ``coding`` tool set a client runs locally."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from skyloop import client_tools
from skyloop.client_tools import available_tool_sets, coding, get_tool_set
from skyloop.client_tools.coding import TOOLS, execute_tool

TOOL_NAMES = ["Read", "Write", "Edit", "Glob", "Grep", "Bash", "LSP", "get_current_time"]
ARG_MODELS = {
    "Read": "ReadArgs",
    "Write": "WriteArgs",
    "Edit": "EditArgs",
    "Glob": "GlobArgs",
    "Grep": "GrepArgs",
    "Bash": "BashArgs",
    "LSP": "LspArgs",
}
REQUIRED = {
    "Read": ["file_path"],
    "Write": ["file_path", "content"],
    "Edit": ["file_path", "old_string", "new_string"],
    "Glob": ["pattern"],
    "Grep": ["pattern"],
    "Bash": ["command"],
    "LSP": ["action", "file_path"],
}
OPTIONAL_NULLABLE = {
    "Read": {"offset": "integer", "limit": "integer"},
    "Glob": {"path": "string"},
    "Grep": {"path": "string", "glob": "string", "output_mode": "string"},
    "Bash": {"timeout": "integer"},
    "LSP": {"line": "integer", "character": "integer"},
}
TRUNCATION_RE = re.compile(r"\n\n\.\.\. \(truncated — (\d+) chars total, showing first 20000\)$")


def _schema(name: str) -> dict[str, Any]:
    return next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == name)


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


# ── get_tool_set ─────────────────────────────────────────


class TestGetToolSet:
    def test_coding_returns_the_module(self) -> None:
        module = get_tool_set("coding")
        assert module is coding
        assert module.__name__ == "skyloop.client_tools.coding"
        assert module.TOOLS is TOOLS
        assert module.execute_tool is execute_tool

    def test_unknown_name_raises_value_error_with_available_list(self) -> None:
        with pytest.raises(ValueError, match="unknown tool set") as info:
            get_tool_set("x")
        assert str(info.value) == "unknown tool set 'x' (available: coding)"

    @pytest.mark.parametrize("name", ["", "Coding", "os", "coding.sys", "../coding", "__init__"])
    def test_other_names_are_rejected_not_imported(self, name: str) -> None:
        with pytest.raises(ValueError, match="unknown tool set"):
            get_tool_set(name)

    def test_unknown_name_raises_instead_of_exiting_or_returning_nothing(self) -> None:
        # An unknown name must raise (so callers can report it), never exit the process
        # and never quietly hand back nothing.
        try:
            found = get_tool_set("nope")
        except ValueError:
            return
        except SystemExit:  # pragma: no cover - this is the failure being guarded against
            pytest.fail("get_tool_set must not sys.exit")
        pytest.fail(f"get_tool_set('nope') returned {found!r} instead of raising")

    def test_available_tool_sets(self) -> None:
        assert available_tool_sets() == ["coding"]
        available_tool_sets().append("mutated")
        assert available_tool_sets() == ["coding"]

    def test_all_exports(self) -> None:
        assert set(client_tools.__all__) == {"get_tool_set", "available_tool_sets"}
        assert set(coding.__all__) == {"TOOLS", "execute_tool"}


# ── TOOLS schemas ────────────────────────────────────────


class TestToolSchemas:
    def test_names_and_order(self) -> None:
        assert [t["function"]["name"] for t in TOOLS] == TOOL_NAMES

    def test_nested_chat_completions_shape(self) -> None:
        for tool in TOOLS:
            assert set(tool) == {"type", "function"}
            assert tool["type"] == "function"
            assert set(tool["function"]) == {"name", "description", "parameters"}
            assert isinstance(tool["function"]["description"], str)
            assert len(tool["function"]["description"]) > 20

    def test_json_serialisable(self) -> None:
        assert json.loads(json.dumps(TOOLS)) == TOOLS

    @pytest.mark.parametrize("name", list(ARG_MODELS))
    def test_parameters_are_pydantic_schema_of_named_model(self, name: str) -> None:
        schema = _schema(name)
        assert schema["type"] == "object"
        assert schema["title"] == ARG_MODELS[name]
        assert getattr(coding, ARG_MODELS[name]).__name__ == ARG_MODELS[name]
        assert "additionalProperties" not in schema
        assert schema["required"] == REQUIRED[name]

    @pytest.mark.parametrize("name", list(ARG_MODELS))
    def test_every_property_has_a_description(self, name: str) -> None:
        for prop_name, prop in _schema(name)["properties"].items():
            assert prop.get("description"), f"{name}.{prop_name} lacks a description"

    @pytest.mark.parametrize(
        ("name", "prop", "json_type"),
        [(name, prop, t) for name, props in OPTIONAL_NULLABLE.items() for prop, t in props.items()],
    )
    def test_optional_params_are_nullable_with_null_default(
        self, name: str, prop: str, json_type: str
    ) -> None:
        schema = _schema(name)
        spec = schema["properties"][prop]
        assert spec["default"] is None
        assert {"type": "null"} in spec["anyOf"]
        assert any(branch.get("type") == json_type for branch in spec["anyOf"])
        assert prop not in schema["required"]

    def test_edit_replace_all_is_optional_boolean(self) -> None:
        spec = _schema("Edit")["properties"]["replace_all"]
        assert spec["type"] == "boolean"
        assert spec["default"] is False

    def test_grep_output_mode_lists_modes(self) -> None:
        spec = _schema("Grep")["properties"]["output_mode"]
        enum_branch = next(b for b in spec["anyOf"] if b.get("type") == "string")
        assert enum_branch["enum"] == ["content", "files_with_matches", "count"]

    def test_zero_arg_tool(self) -> None:
        assert _schema("get_current_time") == {"type": "object", "properties": {}, "required": []}

    def test_descriptions_mention_absolute_paths(self) -> None:
        by_name = {t["function"]["name"]: t["function"] for t in TOOLS}
        for name in ["Read", "Write", "Edit", "LSP"]:
            assert "absolute" in by_name[name]["description"].lower()
            assert "absolute" in by_name[name]["parameters"]["properties"]["file_path"]["description"].lower()

    def test_bash_timeout_documented_in_milliseconds(self) -> None:
        assert "millisecond" in _schema("Bash")["properties"]["timeout"]["description"]


# ── Read ─────────────────────────────────────────────────


class TestRead:
    def test_whole_file_numbered(self, tmp_path: Path) -> None:
        f = _write_lines(tmp_path / "f.txt", ["a", "b", "c", "d", "e"])
        assert execute_tool("Read", {"file_path": str(f)}) == "1\ta\n2\tb\n3\tc\n4\td\n5\te"

    def test_offset_and_limit(self, tmp_path: Path) -> None:
        f = _write_lines(tmp_path / "f.txt", ["a", "b", "c", "d", "e"])
        assert execute_tool("Read", {"file_path": str(f), "offset": 2, "limit": 2}) == "2\tb\n3\tc"

    def test_offset_only_reads_to_end(self, tmp_path: Path) -> None:
        f = _write_lines(tmp_path / "f.txt", ["a", "b", "c", "d", "e"])
        assert execute_tool("Read", {"file_path": str(f), "offset": 4}) == "4\td\n5\te"

    def test_limit_only_reads_from_start(self, tmp_path: Path) -> None:
        f = _write_lines(tmp_path / "f.txt", ["a", "b", "c", "d", "e"])
        assert execute_tool("Read", {"file_path": str(f), "limit": 2}) == "1\ta\n2\tb"

    def test_explicit_nulls_mean_defaults(self, tmp_path: Path) -> None:
        f = _write_lines(tmp_path / "f.txt", ["a", "b"])
        assert execute_tool("Read", {"file_path": str(f), "offset": None, "limit": None}) == "1\ta\n2\tb"

    @pytest.mark.parametrize("offset", [0, 1, -5])
    def test_offset_at_or_below_one_starts_at_first_line(self, tmp_path: Path, offset: int) -> None:
        f = _write_lines(tmp_path / "f.txt", ["a", "b"])
        assert execute_tool("Read", {"file_path": str(f), "offset": offset}) == "1\ta\n2\tb"

    def test_offset_past_end_is_empty(self, tmp_path: Path) -> None:
        f = _write_lines(tmp_path / "f.txt", ["a", "b"])
        assert execute_tool("Read", {"file_path": str(f), "offset": 10}) == ""

    def test_limit_zero_is_empty(self, tmp_path: Path) -> None:
        f = _write_lines(tmp_path / "f.txt", ["a", "b"])
        assert execute_tool("Read", {"file_path": str(f), "limit": 0}) == ""

    def test_limit_past_end_reads_what_exists(self, tmp_path: Path) -> None:
        f = _write_lines(tmp_path / "f.txt", ["a", "b", "c"])
        assert execute_tool("Read", {"file_path": str(f), "offset": 2, "limit": 100}) == "2\tb\n3\tc"

    def test_empty_file(self, tmp_path: Path) -> None:
        f = tmp_path / "empty.txt"
        f.write_text("")
        assert execute_tool("Read", {"file_path": str(f)}) == ""

    def test_line_endings_dropped_and_no_trailing_newline(self, tmp_path: Path) -> None:
        f = tmp_path / "crlf.txt"
        f.write_bytes(b"one\r\ntwo\r\n\r\nfour")
        assert execute_tool("Read", {"file_path": str(f)}) == "1\tone\n2\ttwo\n3\t\n4\tfour"

    def test_tabs_and_unicode_preserved(self, tmp_path: Path) -> None:
        f = _write_lines(tmp_path / "u.txt", ["\tindented", "héllo — ✓"])
        assert execute_tool("Read", {"file_path": str(f)}) == "1\t\tindented\n2\théllo — ✓"

    def test_missing_file(self, tmp_path: Path) -> None:
        missing = tmp_path / "missing.txt"
        result = execute_tool("Read", {"file_path": str(missing)})
        assert result.startswith(f"Error reading {missing}: ")
        assert "No such file" in result

    def test_directory(self, tmp_path: Path) -> None:
        assert execute_tool("Read", {"file_path": str(tmp_path)}).startswith(f"Error reading {tmp_path}: ")

    def test_binary_file(self, tmp_path: Path) -> None:
        f = tmp_path / "bin.dat"
        f.write_bytes(b"\xff\xfe\x00\x80garbage")
        result = execute_tool("Read", {"file_path": str(f)})
        assert result.startswith(f"Error reading {f}: ")
        assert "decode" in result

    def test_relative_path_resolves_against_cwd(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _write_lines(tmp_path / "rel.txt", ["x"])
        monkeypatch.chdir(tmp_path)
        assert execute_tool("Read", {"file_path": "rel.txt"}) == "1\tx"

    def test_long_file_is_truncated(self, tmp_path: Path) -> None:
        f = _write_lines(tmp_path / "big.txt", ["y" * 99] * 1000)
        result = execute_tool("Read", {"file_path": str(f)})
        full = "\n".join(f"{i}\t{'y' * 99}" for i in range(1, 1001))
        match = TRUNCATION_RE.search(result)
        assert match is not None
        assert int(match.group(1)) == len(full)
        assert result[: match.start()] == full[:20_000]

    def test_numeric_strings_are_coerced(self, tmp_path: Path) -> None:
        f = _write_lines(tmp_path / "f.txt", ["a", "b", "c"])
        assert execute_tool("Read", {"file_path": str(f), "offset": "2", "limit": "1"}) == "2\tb"


# ── Write ────────────────────────────────────────────────


class TestWrite:
    def test_creates_file(self, tmp_path: Path) -> None:
        target = tmp_path / "new.txt"
        result = execute_tool("Write", {"file_path": str(target), "content": "hello\nworld\n"})
        assert result == f"Successfully wrote {target}"
        assert target.read_text() == "hello\nworld\n"

    def test_creates_parent_directories(self, tmp_path: Path) -> None:
        target = tmp_path / "a" / "b" / "c.txt"
        assert (
            execute_tool("Write", {"file_path": str(target), "content": "x"})
            == f"Successfully wrote {target}"
        )
        assert target.read_text() == "x"

    def test_overwrites(self, tmp_path: Path) -> None:
        target = tmp_path / "f.txt"
        target.write_text("old content that is longer")
        execute_tool("Write", {"file_path": str(target), "content": "new"})
        assert target.read_text() == "new"

    def test_empty_content(self, tmp_path: Path) -> None:
        target = tmp_path / "empty.txt"
        assert (
            execute_tool("Write", {"file_path": str(target), "content": ""}) == f"Successfully wrote {target}"
        )
        assert target.read_text() == ""

    def test_unicode_round_trips_through_read(self, tmp_path: Path) -> None:
        target = tmp_path / "u.txt"
        execute_tool("Write", {"file_path": str(target), "content": "ünïcødé ✓\n"})
        assert execute_tool("Read", {"file_path": str(target)}) == "1\tünïcødé ✓"

    def test_parent_is_a_file(self, tmp_path: Path) -> None:
        blocker = tmp_path / "blocker"
        blocker.write_text("")
        target = blocker / "child.txt"
        assert execute_tool("Write", {"file_path": str(target), "content": "x"}).startswith(
            f"Error writing {target}: "
        )

    def test_target_is_a_directory(self, tmp_path: Path) -> None:
        result = execute_tool("Write", {"file_path": str(tmp_path), "content": "x"})
        assert result.startswith(f"Error writing {tmp_path}: ")

    def test_missing_content_is_an_argument_error(self, tmp_path: Path) -> None:
        target = tmp_path / "f.txt"
        result = execute_tool("Write", {"file_path": str(target)})
        assert result == "Error: invalid arguments for Write: content: Field required"
        assert not target.exists()


# ── Edit ─────────────────────────────────────────────────


class TestEdit:
    def test_single_replacement(self, tmp_path: Path) -> None:
        f = tmp_path / "f.py"
        f.write_text("x = 1\ny = 2\n")
        result = execute_tool("Edit", {"file_path": str(f), "old_string": "y = 2", "new_string": "y = 3"})
        assert result == f"Replaced 1 occurrence(s) in {f}"
        assert f.read_text() == "x = 1\ny = 3\n"

    def test_multiple_occurrences_refused_and_file_unchanged(self, tmp_path: Path) -> None:
        f = tmp_path / "f.txt"
        f.write_text("foo foo foo")
        result = execute_tool("Edit", {"file_path": str(f), "old_string": "foo", "new_string": "bar"})
        assert result == (
            "Error: old_string appears 3 times (expected 1). Use replace_all=true or provide more context."
        )
        assert f.read_text() == "foo foo foo"

    def test_replace_all(self, tmp_path: Path) -> None:
        f = tmp_path / "f.txt"
        f.write_text("foo foo foo")
        result = execute_tool(
            "Edit", {"file_path": str(f), "old_string": "foo", "new_string": "bar", "replace_all": True}
        )
        assert result == f"Replaced 3 occurrence(s) in {f}"
        assert f.read_text() == "bar bar bar"

    def test_replace_all_with_single_occurrence(self, tmp_path: Path) -> None:
        f = tmp_path / "f.txt"
        f.write_text("a foo b")
        result = execute_tool(
            "Edit", {"file_path": str(f), "old_string": "foo", "new_string": "", "replace_all": True}
        )
        assert result == f"Replaced 1 occurrence(s) in {f}"
        assert f.read_text() == "a  b"

    def test_more_context_disambiguates(self, tmp_path: Path) -> None:
        f = tmp_path / "f.txt"
        f.write_text("a = foo\nb = foo\n")
        result = execute_tool("Edit", {"file_path": str(f), "old_string": "b = foo", "new_string": "b = bar"})
        assert result == f"Replaced 1 occurrence(s) in {f}"
        assert f.read_text() == "a = foo\nb = bar\n"

    def test_multiline_old_string(self, tmp_path: Path) -> None:
        f = tmp_path / "f.txt"
        f.write_text("def f():\n    return 1\n")
        execute_tool(
            "Edit",
            {
                "file_path": str(f),
                "old_string": "def f():\n    return 1",
                "new_string": "def f():\n    return 2",
            },
        )
        assert f.read_text() == "def f():\n    return 2\n"

    def test_not_found(self, tmp_path: Path) -> None:
        f = tmp_path / "f.txt"
        f.write_text("hello")
        result = execute_tool("Edit", {"file_path": str(f), "old_string": "bye", "new_string": "x"})
        assert result == f"Error: old_string not found in {f}"
        assert f.read_text() == "hello"

    def test_missing_file(self, tmp_path: Path) -> None:
        missing = tmp_path / "nope.txt"
        result = execute_tool("Edit", {"file_path": str(missing), "old_string": "a", "new_string": "b"})
        assert result.startswith(f"Error reading {missing}: ")
        assert not missing.exists()

    def test_write_failure(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        f = tmp_path / "f.txt"
        f.write_text("hello")

        def fail(self: Path, *args: Any, **kwargs: Any) -> int:
            raise OSError("disk full")

        monkeypatch.setattr(Path, "write_text", fail)
        result = execute_tool("Edit", {"file_path": str(f), "old_string": "hello", "new_string": "bye"})
        assert result == f"Error writing {f}: disk full"

    def test_replace_all_false_explicit(self, tmp_path: Path) -> None:
        f = tmp_path / "f.txt"
        f.write_text("ab ab")
        result = execute_tool(
            "Edit", {"file_path": str(f), "old_string": "ab", "new_string": "x", "replace_all": False}
        )
        assert result.startswith("Error: old_string appears 2 times")

    def test_missing_new_string_is_an_argument_error(self, tmp_path: Path) -> None:
        f = tmp_path / "f.txt"
        f.write_text("hello")
        result = execute_tool("Edit", {"file_path": str(f), "old_string": "hello"})
        assert result == "Error: invalid arguments for Edit: new_string: Field required"
        assert f.read_text() == "hello"


# ── Glob ─────────────────────────────────────────────────


class TestGlob:
    @pytest.fixture
    def tree(self, tmp_path: Path) -> Path:
        for rel in ["b.py", "a.py", "notes.txt", "pkg/c.py", "pkg/sub/d.py", "pkg/sub/e.txt"]:
            p = tmp_path / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("")
        return tmp_path

    def test_sorted_with_path_prefix(self, tree: Path) -> None:
        result = execute_tool("Glob", {"pattern": "*.py", "path": str(tree)})
        assert result == f"{tree}/a.py\n{tree}/b.py"

    def test_recursive_double_star(self, tree: Path) -> None:
        result = execute_tool("Glob", {"pattern": "**/*.py", "path": str(tree)})
        assert result.splitlines() == [
            f"{tree}/a.py",
            f"{tree}/b.py",
            f"{tree}/pkg/c.py",
            f"{tree}/pkg/sub/d.py",
        ]

    def test_defaults_to_cwd(self, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(tree)
        assert execute_tool("Glob", {"pattern": "*.txt"}) == "./notes.txt"
        assert execute_tool("Glob", {"pattern": "pkg/**/*.txt", "path": None}) == "./pkg/sub/e.txt"

    def test_relative_path_prefix_kept(self, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(tree)
        assert execute_tool("Glob", {"pattern": "*.py", "path": "pkg"}) == "pkg/c.py"

    def test_absolute_pattern_ignores_path(self, tree: Path) -> None:
        result = execute_tool("Glob", {"pattern": f"{tree}/pkg/*.py", "path": "/somewhere/else"})
        assert result == f"{tree}/pkg/c.py"

    def test_no_match(self, tree: Path) -> None:
        assert execute_tool("Glob", {"pattern": "*.rs", "path": str(tree)}) == "No files matched."

    def test_missing_directory_is_no_match(self, tmp_path: Path) -> None:
        assert execute_tool("Glob", {"pattern": "*", "path": str(tmp_path / "nope")}) == "No files matched."

    def test_capped_at_200(self, tmp_path: Path) -> None:
        for i in range(250):
            (tmp_path / f"f{i:03d}.txt").write_text("")
        result = execute_tool("Glob", {"pattern": "*.txt", "path": str(tmp_path)})
        body, notice = result.split("\n\n")
        paths = body.splitlines()
        assert len(paths) == 200
        assert paths[0] == f"{tmp_path}/f000.txt"
        assert paths[-1] == f"{tmp_path}/f199.txt"
        assert notice == "... (250 total matches, showing first 200)"

    def test_exactly_200_not_capped(self, tmp_path: Path) -> None:
        for i in range(200):
            (tmp_path / f"f{i:03d}").write_text("")
        result = execute_tool("Glob", {"pattern": "*", "path": str(tmp_path)})
        assert len(result.splitlines()) == 200
        assert "total matches" not in result

    def test_count_cap_then_char_cap(self, tmp_path: Path) -> None:
        deep = tmp_path / ("d" * 200)
        deep.mkdir()
        for i in range(210):
            (deep / f"{'x' * 100}{i:03d}").write_text("")
        result = execute_tool("Glob", {"pattern": "*/*", "path": str(tmp_path)})
        match = TRUNCATION_RE.search(result)
        assert match is not None
        # The 200-path cap (with its notice) comes first, then the character cap cuts that text.
        assert int(match.group(1)) > 20_000
        assert result.startswith(f"{deep}/{'x' * 100}000\n")
        assert "total matches" not in result


# ── Grep ─────────────────────────────────────────────────


class _FakeRun:
    """Stands in for subprocess.run, recording argv and returning a canned result."""

    def __init__(self, returncode: int = 0, stdout: str = "", stderr: str = "") -> None:
        self.calls: list[tuple[list[str], dict[str, Any]]] = []
        self.result = subprocess.CompletedProcess([], returncode, stdout, stderr)

    def __call__(self, cmd: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append((cmd, kwargs))
        return self.result


def _which(available: dict[str, str | None]) -> Any:
    return lambda name: available.get(name)


@pytest.fixture
def grep_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hide ripgrep so the real ``grep -r`` fallback runs."""
    grep = shutil.which("grep")
    if grep is None:
        pytest.skip("grep is not installed")
    monkeypatch.setattr(coding.shutil, "which", _which({"grep": grep}))


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    (tmp_path / "a.py").write_text("def main():\n    pass\n# main again\n")
    (tmp_path / "b.txt").write_text("main course\n")
    (tmp_path / "c.py").write_text("nothing here\n")
    (tmp_path / "dash.txt").write_text("--flag-like\n")
    return tmp_path


class TestGrepCommand:
    """The argv built for ripgrep and grep, with subprocess.run faked."""

    @pytest.fixture
    def fake(self, monkeypatch: pytest.MonkeyPatch) -> _FakeRun:
        fake = _FakeRun(stdout="hit\n")
        monkeypatch.setattr(coding.subprocess, "run", fake)
        return fake

    def test_rg_default_files_with_matches(self, fake: _FakeRun, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(coding.shutil, "which", _which({"rg": "/bin/rg", "grep": "/bin/grep"}))
        assert execute_tool("Grep", {"pattern": "main"}) == "hit"
        cmd, kwargs = fake.calls[0]
        assert cmd == ["/bin/rg", "-e", "main", ".", "--no-heading", "--files-with-matches"]
        assert kwargs["timeout"] == 30
        assert kwargs.get("shell", False) is False

    def test_rg_content_glob_and_path(self, fake: _FakeRun, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(coding.shutil, "which", _which({"rg": "/bin/rg"}))
        execute_tool("Grep", {"pattern": "-x", "path": "/src", "glob": "*.py", "output_mode": "content"})
        assert fake.calls[0][0] == ["/bin/rg", "-e", "-x", "/src", "--no-heading", "--glob", "*.py"]

    def test_rg_count(self, fake: _FakeRun, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(coding.shutil, "which", _which({"rg": "/bin/rg"}))
        execute_tool("Grep", {"pattern": "p", "output_mode": "count"})
        assert fake.calls[0][0] == ["/bin/rg", "-e", "p", ".", "--no-heading", "--count"]

    @pytest.mark.parametrize(
        ("args", "flags"),
        [
            ({}, ["-l"]),
            ({"output_mode": "files_with_matches"}, ["-l"]),
            ({"output_mode": "count"}, ["-c"]),
            ({"output_mode": "content"}, []),
            ({"glob": "*.py"}, ["-l", "--include=*.py"]),
        ],
    )
    def test_grep_fallback(
        self, fake: _FakeRun, monkeypatch: pytest.MonkeyPatch, args: dict[str, Any], flags: list[str]
    ) -> None:
        monkeypatch.setattr(coding.shutil, "which", _which({"grep": "/bin/grep"}))
        execute_tool("Grep", {"pattern": "p", "path": "/src", **args})
        assert fake.calls[0][0] == ["/bin/grep", "-r", *flags, "-e", "p", "/src"]

    def test_shell_metacharacters_are_passed_verbatim(
        self, fake: _FakeRun, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(coding.shutil, "which", _which({"rg": "/bin/rg"}))
        execute_tool("Grep", {"pattern": "$(touch pwned); `x` | y", "path": "a b"})
        cmd, kwargs = fake.calls[0]
        assert isinstance(cmd, list)
        assert cmd[2] == "$(touch pwned); `x` | y"
        assert cmd[3] == "a b"
        assert not kwargs.get("shell")

    def test_neither_tool_available(self, fake: _FakeRun, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(coding.shutil, "which", _which({}))
        assert (
            execute_tool("Grep", {"pattern": "p"}) == "Search failed: neither ripgrep nor grep is available."
        )
        assert fake.calls == []

    def test_timeout(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def slow(cmd: list[str], **kwargs: Any) -> None:
            raise subprocess.TimeoutExpired(cmd, kwargs["timeout"])

        monkeypatch.setattr(coding.shutil, "which", _which({"rg": "/bin/rg"}))
        monkeypatch.setattr(coding.subprocess, "run", slow)
        assert execute_tool("Grep", {"pattern": "p"}) == "Search timed out after 30s"

    def test_exit_two_is_failure(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(coding.shutil, "which", _which({"rg": "/bin/rg"}))
        monkeypatch.setattr(coding.subprocess, "run", _FakeRun(returncode=2, stderr="bad regex\n"))
        assert execute_tool("Grep", {"pattern": "("}) == "Search failed (exit 2): bad regex"

    def test_exit_one_is_no_matches(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(coding.shutil, "which", _which({"rg": "/bin/rg"}))
        monkeypatch.setattr(coding.subprocess, "run", _FakeRun(returncode=1))
        assert execute_tool("Grep", {"pattern": "zzz"}) == "No matches found."

    def test_output_is_stripped_and_truncated(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(coding.shutil, "which", _which({"rg": "/bin/rg"}))
        monkeypatch.setattr(coding.subprocess, "run", _FakeRun(stdout="\n  " + "z" * 30_000 + "  \n"))
        result = execute_tool("Grep", {"pattern": "z"})
        assert result.startswith("z" * 20_000 + "\n\n... (truncated — 30000 chars total")

    def test_unknown_output_mode_rejected(self, fake: _FakeRun, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(coding.shutil, "which", _which({"rg": "/bin/rg"}))
        result = execute_tool("Grep", {"pattern": "p", "output_mode": "lines"})
        assert result.startswith("Error: invalid arguments for Grep: output_mode: ")
        assert fake.calls == []


@pytest.mark.usefixtures("grep_only")
class TestGrepFallbackReal:
    """The ``grep -r`` fallback, actually run."""

    def test_files_with_matches(self, corpus: Path) -> None:
        result = execute_tool("Grep", {"pattern": "main", "path": str(corpus)})
        assert sorted(result.splitlines()) == [f"{corpus}/a.py", f"{corpus}/b.txt"]

    def test_content(self, corpus: Path) -> None:
        result = execute_tool("Grep", {"pattern": "def main", "path": str(corpus), "output_mode": "content"})
        assert result == f"{corpus}/a.py:def main():"

    def test_count(self, corpus: Path) -> None:
        result = execute_tool("Grep", {"pattern": "main", "path": str(corpus), "output_mode": "count"})
        assert f"{corpus}/a.py:2" in result.splitlines()
        assert f"{corpus}/b.txt:1" in result.splitlines()

    def test_glob_filter(self, corpus: Path) -> None:
        result = execute_tool("Grep", {"pattern": "main", "path": str(corpus), "glob": "*.py"})
        assert result == f"{corpus}/a.py"

    def test_pattern_starting_with_dash(self, corpus: Path) -> None:
        assert execute_tool("Grep", {"pattern": "--flag", "path": str(corpus)}) == f"{corpus}/dash.txt"

    def test_no_matches(self, corpus: Path) -> None:
        assert execute_tool("Grep", {"pattern": "zzzz", "path": str(corpus)}) == "No matches found."

    def test_missing_path_fails(self, tmp_path: Path) -> None:
        missing = tmp_path / "missing"
        result = execute_tool("Grep", {"pattern": "x", "path": str(missing)})
        assert result.startswith("Search failed (exit 2): ")
        assert str(missing) in result

    def test_defaults_to_cwd(self, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(corpus)
        assert execute_tool("Grep", {"pattern": "course"}) == "./b.txt"


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep is not installed")
class TestGrepRipgrepReal:
    def test_files_with_matches(self, corpus: Path) -> None:
        result = execute_tool("Grep", {"pattern": "main", "path": str(corpus)})
        assert sorted(result.splitlines()) == [f"{corpus}/a.py", f"{corpus}/b.txt"]

    def test_content_with_glob(self, corpus: Path) -> None:
        result = execute_tool(
            "Grep", {"pattern": "def main", "path": str(corpus), "glob": "*.py", "output_mode": "content"}
        )
        assert "def main():" in result

    def test_no_matches(self, corpus: Path) -> None:
        assert execute_tool("Grep", {"pattern": "zzzz", "path": str(corpus)}) == "No matches found."


# ── Bash ─────────────────────────────────────────────────


class TestBash:
    def test_stdout(self) -> None:
        assert execute_tool("Bash", {"command": "echo hello"}) == "hello"

    def test_stderr_appended(self) -> None:
        assert execute_tool("Bash", {"command": "echo out; echo err >&2"}) == "out\n\nSTDERR:\nerr"

    def test_stderr_only(self) -> None:
        assert execute_tool("Bash", {"command": "echo err >&2"}) == "STDERR:\nerr"

    def test_no_output(self) -> None:
        assert execute_tool("Bash", {"command": "true"}) == "(no output)"

    def test_exit_code_not_reported(self) -> None:
        assert execute_tool("Bash", {"command": "echo partial; exit 3"}) == "partial"
        assert execute_tool("Bash", {"command": "exit 1"}) == "(no output)"

    def test_shell_features(self) -> None:
        assert execute_tool("Bash", {"command": "X=4; echo $((X * 2)) | tr 8 9"}) == "9"

    def test_runs_in_current_directory(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(tmp_path)
        assert execute_tool("Bash", {"command": "pwd"}) == os.getcwd()

    def test_stdin_is_closed(self) -> None:
        start = time.monotonic()
        assert execute_tool("Bash", {"command": "cat", "timeout": 10_000}) == "(no output)"
        assert time.monotonic() - start < 5

    def test_timeout_is_milliseconds(self) -> None:
        start = time.monotonic()
        assert (
            execute_tool("Bash", {"command": "sleep 10", "timeout": 300}) == "Command timed out after 300ms"
        )
        assert time.monotonic() - start < 5

    def test_timeout_kills_process_group(self, tmp_path: Path) -> None:
        # A background grandchild keeps the pipes open; without killing the group we would block on it,
        # and it would go on to write the marker.
        marker = tmp_path / "marker"
        command = f"(sleep 2; touch {marker}) & sleep 10"
        start = time.monotonic()
        assert execute_tool("Bash", {"command": command, "timeout": 300}) == "Command timed out after 300ms"
        assert time.monotonic() - start < 2
        time.sleep(2.5)
        assert not marker.exists()

    def test_default_timeout(self, monkeypatch: pytest.MonkeyPatch) -> None:
        seen: list[float | None] = []
        real_communicate = subprocess.Popen.communicate

        def spy(self: subprocess.Popen[str], input: Any = None, timeout: float | None = None) -> Any:
            seen.append(timeout)
            return real_communicate(self, input, timeout)

        monkeypatch.setattr(subprocess.Popen, "communicate", spy)
        execute_tool("Bash", {"command": "true"})
        assert seen[0] == 120.0

    def test_default_timeout_reported_in_ms(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(coding, "DEFAULT_BASH_TIMEOUT_MS", 200)
        assert execute_tool("Bash", {"command": "sleep 10"}) == "Command timed out after 200ms"

    def test_non_utf8_output_does_not_fail(self) -> None:
        result = execute_tool("Bash", {"command": "printf 'a\\377b'"})
        assert result.startswith("a")
        assert result.endswith("b")

    def test_large_output_truncated(self) -> None:
        result = execute_tool("Bash", {"command": f"{sys.executable} -c \"print('q' * 25000)\""})
        assert result.startswith(
            "q" * 20_000 + "\n\n... (truncated — 25000 chars total, showing first 20000)"
        )

    def test_missing_command_is_an_argument_error(self) -> None:
        assert execute_tool("Bash", {}) == "Error: invalid arguments for Bash: command: Field required"


# ── LSP and get_current_time ─────────────────────────────


class TestLsp:
    def test_stub(self) -> None:
        result = execute_tool("LSP", {"action": "hover", "file_path": "/x.py", "line": 3, "character": 4})
        assert result == "LSP not implemented in this client. Action: hover, file: /x.py"

    def test_optional_position(self) -> None:
        result = execute_tool("LSP", {"action": "symbols", "file_path": "/x.py"})
        assert result == "LSP not implemented in this client. Action: symbols, file: /x.py"

    def test_unknown_action_rejected(self) -> None:
        result = execute_tool("LSP", {"action": "rename", "file_path": "/x.py"})
        assert result.startswith("Error: invalid arguments for LSP: action: ")


class TestGetCurrentTime:
    def test_format_and_value(self) -> None:
        # a second of slack: datetime.now() and time.strftime() read the clock apart (seen flake)
        before = datetime.now().replace(microsecond=0) - timedelta(seconds=1)
        result = execute_tool("get_current_time", {})
        after = datetime.now()
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", result)
        assert before <= datetime.fromisoformat(result) <= after

    def test_none_arguments(self) -> None:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", execute_tool("get_current_time", None))

    def test_rejects_arguments(self) -> None:
        result = execute_tool("get_current_time", {"tz": "UTC"})
        assert result == "Error: invalid arguments for get_current_time: tz: Extra inputs are not permitted"


# ── Truncation ───────────────────────────────────────────


class TestTruncation:
    def test_exactly_at_limit_untouched(self, tmp_path: Path) -> None:
        f = tmp_path / "f.txt"
        f.write_text("x" * (20_000 - 2))  # "1\t" prefix makes exactly 20,000
        result = execute_tool("Read", {"file_path": str(f)})
        assert len(result) == 20_000
        assert "truncated" not in result

    def test_one_over_limit(self, tmp_path: Path) -> None:
        f = tmp_path / "f.txt"
        f.write_text("x" * (20_000 - 1))
        result = execute_tool("Read", {"file_path": str(f)})
        assert result == "1\t" + "x" * 19_998 + "\n\n... (truncated — 20001 chars total, showing first 20000)"


# ── execute_tool dispatch ────────────────────────────────


class TestExecuteTool:
    def test_unknown_tool(self) -> None:
        assert execute_tool("Nope", {}) == "Unknown tool: Nope"
        assert execute_tool("read", {"file_path": "/x"}) == "Unknown tool: read"

    def test_none_arguments_for_tool_needing_some(self) -> None:
        assert execute_tool("Glob", None) == "Error: invalid arguments for Glob: pattern: Field required"

    def test_missing_several(self) -> None:
        result = execute_tool("Edit", {})
        assert result == (
            "Error: invalid arguments for Edit: file_path: Field required; "
            "old_string: Field required; new_string: Field required"
        )

    def test_extra_argument(self, tmp_path: Path) -> None:
        f = _write_lines(tmp_path / "f.txt", ["a"])
        result = execute_tool("Read", {"file_path": str(f), "bogus": 1})
        assert result == "Error: invalid arguments for Read: bogus: Extra inputs are not permitted"

    def test_wrong_type(self) -> None:
        result = execute_tool("Read", {"file_path": 42})
        assert result.startswith("Error: invalid arguments for Read: file_path: ")
        assert "string" in result

    def test_wrong_type_not_coercible(self, tmp_path: Path) -> None:
        result = execute_tool("Read", {"file_path": str(tmp_path / "f"), "offset": "two"})
        assert result.startswith("Error: invalid arguments for Read: offset: ")

    def test_error_message_does_not_echo_input(self) -> None:
        result = execute_tool("Bash", {"command": ["x" * 50_000]})
        assert result.startswith("Error: invalid arguments for Bash: command: ")
        assert len(result) < 500

    def test_non_dict_arguments(self) -> None:
        result = execute_tool("Read", ["file_path"])  # type: ignore[arg-type]
        assert result.startswith("Error: invalid arguments for Read: ")

    def test_json_string_arguments(self, tmp_path: Path) -> None:
        f = _write_lines(tmp_path / "f.txt", ["a", "b"])
        assert execute_tool("Read", json.dumps({"file_path": str(f), "limit": 1})) == "1\ta"  # type: ignore[arg-type]

    def test_invalid_json_string_arguments(self) -> None:
        result = execute_tool("Read", "{not json")  # type: ignore[arg-type]
        assert result == "Error: invalid arguments for Read: arguments are not valid JSON"

    def test_unexpected_exception_is_reported(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def boom(*args: Any, **kwargs: Any) -> list[str]:
            raise RuntimeError("boom")

        monkeypatch.setattr(coding.glob_mod, "glob", boom)
        assert execute_tool("Glob", {"pattern": "*"}) == "Error executing Glob: boom"

    def test_unexpected_exception_in_bash(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def no_popen(*args: Any, **kwargs: Any) -> None:
            raise OSError("no shell")

        monkeypatch.setattr(coding.subprocess, "Popen", no_popen)
        assert execute_tool("Bash", {"command": "echo"}) == "Error executing Bash: no shell"

    def test_arguments_not_mutated(self, tmp_path: Path) -> None:
        f = _write_lines(tmp_path / "f.txt", ["a"])
        arguments = {"file_path": str(f)}
        execute_tool("Read", arguments)
        assert arguments == {"file_path": str(f)}

    @pytest.mark.parametrize("name", TOOL_NAMES)
    def test_every_tool_answers_garbage_with_a_string(self, name: str) -> None:
        result = execute_tool(name, {"file_path": object(), "pattern": 1, "command": None, "zzz": True})
        assert isinstance(result, str)
        assert result.startswith(f"Error: invalid arguments for {name}: ")
