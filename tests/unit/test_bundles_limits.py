"""Every limit in ``skyloop.bundles.limits`` at its boundary: the limit itself passes, one more is refused.

test_bundles.py covers the refusals far past a limit; these pin the exact
edge, so an off-by-one (``>=`` for ``>``) or a changed constant shows up.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from contextlib import AbstractContextManager, nullcontext

import pytest

from skyloop.bundles import (
    build_bundle,
    limits,
    load_agent_bundle,
    parse_multipart_form,
    parse_session_metadata,
)
from skyloop.errors import InvalidInputError, PayloadTooLargeError

SPEC = "name: x\nexecutor: {model: m}\n"

# `over` is how far past the limit a case goes: 0 is exactly at it (accepted), 1 is one past (refused).
AT_AND_OVER = pytest.mark.parametrize("over", [0, 1], ids=["at-limit", "over-limit"])


def _ok_or_raises(over: int, error: type[Exception], match: str) -> AbstractContextManager[object]:
    """At the limit the block must pass; one past it must raise ``error``."""
    return pytest.raises(error, match=match) if over else nullcontext()


# --------------------------------------------------------------------------
# multipart
# --------------------------------------------------------------------------

_PART_HEAD = (
    b'--XyZ\r\nContent-Disposition: form-data; name="bundle"; filename="a.tgz"\r\n'
    b"Content-Type: application/gzip\r\n\r\n"
)
_FORM_END = b"\r\n--XyZ--\r\n"


@AT_AND_OVER
def test_max_request_bytes(over: int) -> None:
    size = limits.MAX_REQUEST_BYTES + over
    body = _PART_HEAD + b"\x00" * (size - len(_PART_HEAD) - len(_FORM_END)) + _FORM_END
    assert len(body) == size
    with _ok_or_raises(over, PayloadTooLargeError, rf"^request body is {size} bytes; the limit is"):
        form = parse_multipart_form(body, "multipart/form-data; boundary=XyZ")
        assert len(form.files["bundle"].data) == size - len(_PART_HEAD) - len(_FORM_END)


@AT_AND_OVER
def test_max_form_parts(over: int) -> None:
    count = limits.MAX_FORM_PARTS + over
    body = b"".join(
        b'--XyZ\r\nContent-Disposition: form-data; name="f%d"\r\n\r\nv\r\n' % i for i in range(count)
    )
    with _ok_or_raises(over, InvalidInputError, f"has {count} parts; at most {limits.MAX_FORM_PARTS}"):
        form = parse_multipart_form(body + b"--XyZ--\r\n", "multipart/form-data; boundary=XyZ")
        assert len(form.fields) == count


@AT_AND_OVER
def test_max_boundary_chars(over: int) -> None:
    boundary = "b" * (limits.MAX_BOUNDARY_CHARS + over)
    body = f'--{boundary}\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--{boundary}--\r\n'
    with _ok_or_raises(over, InvalidInputError, "not a valid RFC 2046 boundary"):
        form = parse_multipart_form(body.encode(), f"multipart/form-data; boundary={boundary}")
        assert form.fields == {"a": "1"}


# --------------------------------------------------------------------------
# archive
# --------------------------------------------------------------------------


@AT_AND_OVER
def test_max_bundle_bytes(over: int) -> None:
    # Bytes after the gzip member are ignored, so padding makes a valid bundle of any size.
    bundle = build_bundle({"agent.yaml": SPEC})
    data = bundle + bytes(limits.MAX_BUNDLE_BYTES + over - len(bundle))
    with _ok_or_raises(over, PayloadTooLargeError, rf"^invalid agent bundle: archive is {len(data)} bytes"):
        assert load_agent_bundle(data).name == "x"


@AT_AND_OVER
def test_max_bundle_uncompressed_bytes(over: int) -> None:
    padding = bytes(limits.MAX_BUNDLE_UNCOMPRESSED_BYTES + over - len(SPEC))
    data = build_bundle({"agent.yaml": SPEC, "zeros.bin": padding})
    with _ok_or_raises(over, PayloadTooLargeError, "archive expands to more than"):
        assert load_agent_bundle(data).name == "x"


@AT_AND_OVER
def test_tar_framing_allowance(over: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Member data exactly at its limit; the stream cap (data limit + allowance)
    # is set to the whole inflated tar, headers and padding included, or one byte less.
    files: dict[str, bytes | str] = {"agent.yaml": SPEC, "f.txt": "x" * 100}
    data = build_bundle(files)
    member_bytes = len(SPEC) + 100
    stream_bytes = len(gzip.decompress(data))
    monkeypatch.setattr(limits, "MAX_BUNDLE_UNCOMPRESSED_BYTES", member_bytes)
    monkeypatch.setattr(limits, "TAR_FRAMING_ALLOWANCE", stream_bytes - member_bytes - over)
    with _ok_or_raises(over, PayloadTooLargeError, f"archive expands to more than {member_bytes} bytes"):
        assert load_agent_bundle(data).name == "x"


@AT_AND_OVER
def test_max_bundle_files(over: int) -> None:
    files: dict[str, bytes | str] = {"agent.yaml": SPEC}
    files.update({f"f{i}.txt": "" for i in range(limits.MAX_BUNDLE_FILES + over - 1)})
    with _ok_or_raises(over, PayloadTooLargeError, f"more than {limits.MAX_BUNDLE_FILES} members"):
        assert load_agent_bundle(build_bundle(files)).name == "x"


def _pax_info(name: str, header_bytes: int) -> tarfile.TarInfo:
    """A member whose pax extension header carries exactly ``header_bytes`` bytes."""

    def header_size(comment_chars: int) -> int:
        info = tarfile.TarInfo(name)
        info.pax_headers = {"comment": "c" * comment_chars}
        raw = info.tobuf(tarfile.PAX_FORMAT)
        return int(raw[124:136].rstrip(b"\0 "), 8)  # the first block is the pax header's own

    guess = header_bytes - 20
    chars = guess + header_bytes - header_size(guess)
    assert header_size(chars) == header_bytes
    info = tarfile.TarInfo(name)
    info.pax_headers = {"comment": "c" * chars}
    return info


def _tar_of(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, payload in members:
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    return gzip.compress(raw.getvalue(), mtime=0)


@AT_AND_OVER
def test_max_tar_extension_header_bytes(over: int) -> None:
    info = _pax_info("agent.yaml", limits.MAX_TAR_EXTENSION_HEADER_BYTES + over)
    data = _tar_of([(info, SPEC.encode())])
    size = limits.MAX_TAR_EXTENSION_HEADER_BYTES + over
    with _ok_or_raises(over, PayloadTooLargeError, f"a tar extension header is {size} bytes"):
        assert load_agent_bundle(data).name == "x"


@AT_AND_OVER
def test_max_tar_extension_headers_total_bytes(over: int) -> None:
    # Each header within the per-header cap; together exactly at (or one byte past) the total cap.
    per_header = limits.MAX_TAR_EXTENSION_HEADER_BYTES
    full, rest = divmod(limits.MAX_TAR_EXTENSION_HEADERS_TOTAL_BYTES, per_header)
    assert rest == 0
    assert full >= 2
    sizes = [per_header] * (full - 1) + [per_header // 2, per_header // 2 + over]
    members = [(_pax_info("agent.yaml", sizes[0]), SPEC.encode())]
    members += [(_pax_info(f"f{i}.txt", size), b"") for i, size in enumerate(sizes[1:])]
    assert sum(sizes) == limits.MAX_TAR_EXTENSION_HEADERS_TOTAL_BYTES + over
    with _ok_or_raises(over, PayloadTooLargeError, "tar extension headers exceed"):
        assert load_agent_bundle(_tar_of(members)).name == "x"


# --------------------------------------------------------------------------
# YAML
# --------------------------------------------------------------------------


@AT_AND_OVER
def test_max_yaml_bytes(over: int) -> None:
    text = SPEC + "#" * (limits.MAX_YAML_BYTES + over - len(SPEC) - 1) + "\n"
    assert len(text.encode()) == limits.MAX_YAML_BYTES + over
    with _ok_or_raises(over, PayloadTooLargeError, r"agent\.yaml is larger than the \d+ byte limit"):
        assert load_agent_bundle(build_bundle({"agent.yaml": text})).name == "x"


@AT_AND_OVER
def test_max_yaml_aliases(over: int) -> None:
    refs = ", ".join(["*v"] * (limits.MAX_YAML_ALIASES + over))
    text = f"{SPEC}labels: &v 1\nparams: [{refs}]\n"  # keys omnigent specs have
    with _ok_or_raises(over, InvalidInputError, "uses too many aliases"):
        spec = load_agent_bundle(build_bundle({"agent.yaml": text}))
        assert spec.model_extra is not None
        assert len(spec.model_extra["params"]) == limits.MAX_YAML_ALIASES


# The real node limit takes about a second to reach (that is its point), so
# the node tests lower it; the boundary logic is the same.
_NODES = 50
# SPEC composes to 7 nodes: the root mapping, 'name', 'x', 'executor', its mapping, 'model', 'm'.
_SPEC_NODES = 7


@AT_AND_OVER
def test_max_yaml_nodes_while_composing(over: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_YAML_NODES", _NODES)
    items = _NODES + over - _SPEC_NODES - 2  # the 'items' key and its sequence are 2 more
    text = SPEC + "params: [" + ", ".join(["1"] * items) + "]\n"
    with _ok_or_raises(over, InvalidInputError, rf"has too many nodes \(more than {_NODES}\)"):
        assert load_agent_bundle(build_bundle({"agent.yaml": text})).name == "x"


@AT_AND_OVER
def test_max_yaml_nodes_once_expanded(over: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_YAML_NODES", _NODES)
    # 'v: &v [1, 2]' is 4 nodes, 'r: [...]' 2 more; each *v expands to 3, each pad scalar is 1.
    # Composed, the document stays far under the limit; expanded, it is exactly at it (or one past).
    fixed = _SPEC_NODES + 4 + 2
    aliases, pads = divmod(_NODES - fixed, 3)
    items = ["*v"] * aliases + ["0"] * (pads + over)
    text = f"{SPEC}labels: &v [1, 2]\nparams: [{', '.join(items)}]\n"
    assert fixed + 3 * aliases + pads + over == _NODES + over
    with _ok_or_raises(over, InvalidInputError, rf"expands to too many nodes \(more than {_NODES}\)"):
        assert load_agent_bundle(build_bundle({"agent.yaml": text})).name == "x"


@AT_AND_OVER
def test_max_yaml_depth_while_composing(over: int) -> None:
    lists = limits.MAX_YAML_DEPTH + over - 1  # the root mapping is the first level
    text = SPEC + "params: " + "[" * lists + "]" * lists + "\n"
    with _ok_or_raises(over, InvalidInputError, rf"nests deeper than {limits.MAX_YAML_DEPTH} levels$"):
        assert load_agent_bundle(build_bundle({"agent.yaml": text})).name == "x"


@AT_AND_OVER
def test_max_yaml_depth_once_expanded(over: int) -> None:
    # Neither branch nests deeply as written; 'b' does once '*a' is expanded into it.
    inner = limits.MAX_YAML_DEPTH // 2
    outer = limits.MAX_YAML_DEPTH + over - 1 - inner
    text = f"{SPEC}labels: &a {'[' * inner}{']' * inner}\nparams: {'[' * outer}*a{']' * outer}\n"
    with _ok_or_raises(over, InvalidInputError, "nests deeper than .* once aliases are expanded"):
        assert load_agent_bundle(build_bundle({"agent.yaml": text})).name == "x"


# --------------------------------------------------------------------------
# session metadata
# --------------------------------------------------------------------------


@AT_AND_OVER
def test_max_metadata_bytes(over: int) -> None:
    text = '{"title": "é"}'  # é is 2 bytes: the limit counts UTF-8 bytes, not characters
    text += " " * (limits.MAX_METADATA_BYTES + over - len(text.encode()))
    with _ok_or_raises(over, PayloadTooLargeError, f"larger than {limits.MAX_METADATA_BYTES} bytes"):
        assert parse_session_metadata(text).title == "é"


@AT_AND_OVER
def test_max_title_chars(over: int) -> None:
    title = "t" * (limits.MAX_TITLE_CHARS + over)
    with _ok_or_raises(
        over, InvalidInputError, f"title: String should have at most {limits.MAX_TITLE_CHARS}"
    ):
        assert parse_session_metadata(json.dumps({"title": title})).title == title


@AT_AND_OVER
def test_max_labels(over: int) -> None:
    labels = {f"k{i}": "v" for i in range(limits.MAX_LABELS + over)}
    with _ok_or_raises(
        over, InvalidInputError, f"labels: Dictionary should have at most {limits.MAX_LABELS}"
    ):
        assert parse_session_metadata(json.dumps({"labels": labels})).labels == labels


@AT_AND_OVER
def test_max_label_key_chars(over: int) -> None:
    key = "k" * (limits.MAX_LABEL_KEY_CHARS + over)
    match = f"String should have at most {limits.MAX_LABEL_KEY_CHARS} characters"
    with _ok_or_raises(over, InvalidInputError, match):
        assert parse_session_metadata(json.dumps({"labels": {key: "v"}})).labels == {key: "v"}


@AT_AND_OVER
def test_max_label_value_chars(over: int) -> None:
    value = "v" * (limits.MAX_LABEL_VALUE_CHARS + over)
    match = rf"labels\.k: String should have at most {limits.MAX_LABEL_VALUE_CHARS}"
    with _ok_or_raises(over, InvalidInputError, match):
        assert parse_session_metadata(json.dumps({"labels": {"k": value}})).labels == {"k": value}


# --------------------------------------------------------------------------
# error-message bounds
# --------------------------------------------------------------------------


@AT_AND_OVER
def test_max_shown_name_chars(over: int) -> None:
    name = "n" * (limits.MAX_SHOWN_NAME_CHARS + over)
    part = f'--XyZ\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n1\r\n'
    body = (part * 2 + "--XyZ--\r\n").encode()
    with pytest.raises(InvalidInputError) as caught:
        parse_multipart_form(body, "multipart/form-data; boundary=XyZ")
    shown = name if not over else name[: limits.MAX_SHOWN_NAME_CHARS - 1] + "…"
    assert caught.value.message == f"multipart form repeats the field {shown!r}"


@AT_AND_OVER
def test_max_listed_errors(over: int) -> None:
    count = limits.MAX_LISTED_ERRORS + over
    with pytest.raises(InvalidInputError) as caught:
        parse_session_metadata(json.dumps({f"bogus{i}": 1 for i in range(count)}))
    message = caught.value.message
    assert message.count("Extra inputs are not permitted") == limits.MAX_LISTED_ERRORS
    assert message.endswith("; and 1 more") if over else "more" not in message


@AT_AND_OVER
def test_max_listed_root_yaml(over: int) -> None:
    names = [f"a{i}.yaml" for i in range(limits.MAX_LISTED_ROOT_YAML + over)]
    with pytest.raises(InvalidInputError, match="several YAML files at the root") as caught:
        load_agent_bundle(build_bundle(dict.fromkeys(names, SPEC)))
    listed = ", ".join(repr(n) for n in names[: limits.MAX_LISTED_ROOT_YAML])
    assert f"({listed}) and no config.yaml" in caught.value.message
    assert (repr(names[-1]) in caught.value.message) == (not over)


@AT_AND_OVER
def test_max_shown_location_chars(over: int) -> None:
    key = "k" * (limits.MAX_SHOWN_LOCATION_CHARS + over)
    with pytest.raises(InvalidInputError) as caught:
        load_agent_bundle(build_bundle({"agent.yaml": f"{SPEC}{key}: .inf\n"}))
    shown = key if not over else key[: limits.MAX_SHOWN_LOCATION_CHARS - 1] + "…"
    assert caught.value.message == f"invalid agent bundle: non-finite number at {shown} (in agent.yaml)"
