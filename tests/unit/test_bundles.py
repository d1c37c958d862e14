"""Bundle, multipart and metadata parsing: the happy paths and every refusal."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import time

import httpx
import pytest

from skyloop.bundles import (
    MAX_BUNDLE_BYTES,
    MAX_BUNDLE_FILES,
    MAX_BUNDLE_UNCOMPRESSED_BYTES,
    MAX_REQUEST_BYTES,
    MAX_YAML_ALIASES,
    MAX_YAML_BYTES,
    SessionMetadata,
    build_bundle,
    limits,
    load_agent_bundle,
    load_agent_spec_dict,
    parse_multipart_form,
    parse_session_metadata,
)
from skyloop.errors import InvalidInputError, PayloadTooLargeError, UnsupportedMediaTypeError

SECRET = "sk-TOPSECRET-123"

AGENT_YAML = f"""\
name: coder
prompt: You write code.
executor:
  harness: openai-agents
  model: gpt-test
  profile: ""
  auth:
    type: api_key
    api_key: {SECRET}
    base_url: http://mock.local/v1
tools:
  builtins: [list_files, sys_os_shell]
policies:
  - allow: all
"""

MINIMAL_YAML = "name: {name}\nexecutor:\n  model: gpt-test\n"


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]], *, compress: bool = True) -> bytes:
    """Hand-build a (possibly malicious) tar from explicit TarInfo headers."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return gzip.compress(raw.getvalue(), mtime=0) if compress else raw.getvalue()


def _info(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


def _yaml_bundle(text: str, name: str = "agent.yaml") -> bytes:
    return build_bundle({name: text})


# --------------------------------------------------------------------------
# Accepted bundles
# --------------------------------------------------------------------------


def test_single_file_bundle() -> None:
    spec = load_agent_bundle(_yaml_bundle(AGENT_YAML, "coder.yaml"))
    assert spec.name == "coder"
    assert spec.prompt == "You write code."
    assert spec.executor.model == "gpt-test"
    assert spec.executor.profile == ""
    assert spec.executor.auth is not None
    assert spec.executor.auth.api_key is not None
    assert spec.executor.auth.api_key.get_secret_value() == SECRET
    assert spec.tools == {"builtins": ["list_files", "sys_os_shell"]}
    assert spec.model_extra == {"policies": [{"allow": "all"}]}
    assert SECRET not in repr(spec)


def test_yml_suffix_and_plain_tar_accepted() -> None:
    plain = _tar([(_info("a.yml"), MINIMAL_YAML.format(name="plain").encode())], compress=False)
    assert load_agent_bundle(plain).name == "plain"


def test_profile_empty_string_and_omnigent_keys_kept() -> None:
    text = 'name: x\nexecutor: {model: m, profile: "", temperature: 0.2, top_k: 3}\nparams: {a: [1, 2]}\n'
    spec = load_agent_bundle(_yaml_bundle(text))
    assert spec.executor.profile == ""
    assert spec.executor.temperature == 0.2
    assert spec.executor.model_extra == {"top_k": 3}
    assert spec.model_extra == {"params": {"a": [1, 2]}}


def test_an_unknown_top_level_key_is_refused_naming_it() -> None:
    text = "name: x\nexecutor: {model: m}\nenvironmnet: {type: hosted}\n"
    with pytest.raises(InvalidInputError, match=r"unknown key 'environmnet'") as caught:
        load_agent_bundle(_yaml_bundle(text))
    assert caught.value.param == "environmnet"


def test_dates_and_scalar_keys_become_json_compatible() -> None:
    text = "name: x\nexecutor: {model: m}\nparams: {created: 2024-01-02, ports: {8080: web, true: yes}}\n"
    spec = load_agent_bundle(_yaml_bundle(text))
    assert spec.model_extra == {"params": {"created": "2024-01-02", "ports": {"8080": "web", "true": True}}}


def test_directory_bundle_config_at_root() -> None:
    data = build_bundle(
        {
            "config.yaml": MINIMAL_YAML.format(name="dirbundle"),
            "other.yaml": MINIMAL_YAML.format(name="ignored"),
            "tools/python/tool.py": "def tool():\n    return 1\n",
            "skills/a/SKILL.md": "# skill",
        }
    )
    assert load_agent_bundle(data).name == "dirbundle"


def test_directory_bundle_in_single_top_level_directory() -> None:
    members = [
        (_info("coder", tarfile.DIRTYPE), None),
        (_info("./coder/config.yaml"), MINIMAL_YAML.format(name="nested").encode()),
        (_info("coder/tools", tarfile.DIRTYPE), None),
        (_info("coder/tools/python/tool.py"), b"print(1)\n"),
    ]
    assert load_agent_bundle(_tar(members)).name == "nested"


def test_oversize_yaml_that_is_not_the_spec_is_fine() -> None:
    data = build_bundle(
        {
            "big.yaml": "x: " + "a" * (MAX_YAML_BYTES + 10),
            "config.yaml": MINIMAL_YAML.format(name="ok"),
        }
    )
    assert load_agent_bundle(data).name == "ok"


def test_build_bundle_is_deterministic() -> None:
    files: dict[str, bytes | str] = {"a.yaml": "name: a", "b/c.txt": b"\x00\x01"}
    assert build_bundle(files) == build_bundle(files)
    with tarfile.open(fileobj=io.BytesIO(build_bundle(files)), mode="r:gz") as tar:
        assert tar.getnames() == ["a.yaml", "b/c.txt"]


# --------------------------------------------------------------------------
# Bundle layout refusals
# --------------------------------------------------------------------------


def test_several_root_yaml_files_refused() -> None:
    data = build_bundle({"a.yaml": MINIMAL_YAML.format(name="a"), "b.yml": MINIMAL_YAML.format(name="b")})
    with pytest.raises(InvalidInputError, match=r"^invalid agent bundle: several YAML files at the root"):
        load_agent_bundle(data)


@pytest.mark.parametrize(
    "files",
    [
        {"README.md": "hi"},
        {"a/config.yaml": "name: a", "b/config.yaml": "name: b"},
        {"a/b/config.yaml": "name: a"},
    ],
)
def test_no_spec_file_refused(files: dict[str, bytes | str]) -> None:
    with pytest.raises(InvalidInputError, match=r"^invalid agent bundle: no agent YAML found"):
        load_agent_bundle(build_bundle(files))


def test_duplicate_member_refused() -> None:
    members = [(_info("a.yaml"), b"name: a"), (_info("a.yaml"), b"name: b")]
    with pytest.raises(InvalidInputError, match=r"'a\.yaml' appears more than once"):
        load_agent_bundle(_tar(members))


# --------------------------------------------------------------------------
# Unsafe members
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("info", "problem"),
    [
        (_info("/etc/agent.yaml"), "absolute path"),
        (_info("C:/agent.yaml"), "absolute path"),
        (_info("../agent.yaml"), "'..' path component"),
        (_info("a/../../agent.yaml"), "'..' path component"),
        (_info("a\\agent.yaml"), "backslash"),
        (_info("link.yaml", tarfile.SYMTYPE, "/etc/passwd"), "symbolic link"),
        (_info("hard.yaml", tarfile.LNKTYPE, "agent.yaml"), "hard link"),
        (_info("tty", tarfile.CHRTYPE), "character device"),
        (_info("disk", tarfile.BLKTYPE), "block device"),
        (_info("pipe", tarfile.FIFOTYPE), "FIFO"),
        (_info("odd", b"Z"), "unsupported type"),
    ],
    ids=lambda v: v if isinstance(v, str) else v.name,
)
def test_unsafe_member_refused(info: tarfile.TarInfo, problem: str) -> None:
    members = [(_info("agent.yaml"), MINIMAL_YAML.format(name="x").encode())]
    members.append((info, b"" if info.type in (tarfile.REGTYPE, b"Z") else None))
    with pytest.raises(InvalidInputError) as caught:
        load_agent_bundle(_tar(members))
    message = caught.value.message
    assert message.startswith("invalid agent bundle: member ")
    assert problem in message
    assert repr(info.name) in message


def test_nul_in_member_name_refused() -> None:
    info = _info("placeholder")
    info.pax_headers = {"path": "a\x00b.yaml"}
    with pytest.raises(InvalidInputError, match="NUL byte"):
        load_agent_bundle(_tar([(info, b"name: a")]))


# --------------------------------------------------------------------------
# Size limits and malformed archives
# --------------------------------------------------------------------------


def test_compressed_bundle_over_limit() -> None:
    with pytest.raises(PayloadTooLargeError, match=r"^invalid agent bundle: archive is \d+ bytes"):
        load_agent_bundle(b"\x1f\x8b" + bytes(MAX_BUNDLE_BYTES))


def test_too_many_members() -> None:
    data = build_bundle({f"f{i}.txt": "" for i in range(MAX_BUNDLE_FILES + 1)})
    with pytest.raises(PayloadTooLargeError, match=f"more than {MAX_BUNDLE_FILES} members"):
        load_agent_bundle(data)


def test_single_member_over_uncompressed_limit() -> None:
    data = _tar([(_info("zeros.bin"), bytes(MAX_BUNDLE_UNCOMPRESSED_BYTES + 1))])
    assert len(data) < 100 * 1024  # a gzip bomb: tiny on the wire
    with pytest.raises(PayloadTooLargeError, match="expands to more than"):
        load_agent_bundle(data)


def test_gzip_bomb_spread_over_members() -> None:
    chunk = bytes(MAX_BUNDLE_UNCOMPRESSED_BYTES // 3 + 1)
    data = _tar([(_info(f"z{i}.bin"), chunk) for i in range(3)])
    with pytest.raises(PayloadTooLargeError, match="expands to more than"):
        load_agent_bundle(data)


def test_raw_gzip_of_zeros_is_refused_quickly() -> None:
    bomb = gzip.compress(bytes(200 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < MAX_BUNDLE_BYTES
    started = time.monotonic()
    with pytest.raises((InvalidInputError, PayloadTooLargeError)):
        load_agent_bundle(bomb)
    assert time.monotonic() - started < 5


def test_decompressed_stream_is_counted_not_just_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    # Declared member sizes stay under the limit; the real stream (headers and
    # padding included) does not, and the counting reader catches it.
    monkeypatch.setattr(limits, "MAX_BUNDLE_UNCOMPRESSED_BYTES", 4096)
    monkeypatch.setattr(limits, "TAR_FRAMING_ALLOWANCE", 0)
    data = build_bundle({f"f{i}.txt": "x" * 100 for i in range(10)})
    with pytest.raises(PayloadTooLargeError, match="expands to more than"):
        load_agent_bundle(data)


def test_spec_yaml_over_limit() -> None:
    data = build_bundle({"agent.yaml": MINIMAL_YAML.format(name="x") + "#" * MAX_YAML_BYTES})
    with pytest.raises(PayloadTooLargeError, match=r"agent\.yaml is larger than"):
        load_agent_bundle(data)


def test_oversize_pax_header_refused() -> None:
    info = _info("agent.yaml")
    info.pax_headers = {"comment": "x" * 8192}
    with pytest.raises(PayloadTooLargeError, match="extension header"):
        load_agent_bundle(_tar([(info, MINIMAL_YAML.format(name="x").encode())]))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "the bundle is empty"),
        (b"this is not an archive at all" * 40, "not a gzip-compressed tar archive"),
        (gzip.compress(b"not a tar either" * 100), "not a valid gzip-compressed tar archive"),
        (
            build_bundle({"agent.yaml": "name: x", "pad.bin": os.urandom(100_000)})[:-1000],
            "archive is corrupt or truncated",
        ),
        (build_bundle({"agent.yaml": "name: x"})[:12], "not a valid gzip-compressed tar archive"),
        (
            _tar([(_info("a.yaml"), b"name: a\n" * 200)], compress=False)[:1024],
            "archive is corrupt or truncated",
        ),
        (b"\x1f\x8b\x08\x00garbage-after-the-gzip-magic", "not a valid gzip-compressed tar archive"),
    ],
    ids=[
        "empty",
        "garbage",
        "gzip-not-tar",
        "truncated-gzip",
        "gzip-header-only",
        "truncated-tar",
        "corrupt-gzip",
    ],
)
def test_not_an_archive(data: bytes, match: str) -> None:
    with pytest.raises(InvalidInputError, match=f"^invalid agent bundle: {match}"):
        load_agent_bundle(data)


# --------------------------------------------------------------------------
# YAML hardening and spec validation
# --------------------------------------------------------------------------


def test_billion_laughs_refused() -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 9):
        refs = ",".join([f"*a{level - 1}"] * 9)
        lines.append(f"a{level}: &a{level} [{refs}]")
    text = "name: x\nexecutor: {model: m}\n" + "\n".join(lines) + "\n"
    assert text.count("*") <= MAX_YAML_ALIASES  # the alias count alone would not catch it
    with pytest.raises(
        InvalidInputError, match=r"^invalid agent bundle: YAML in agent\.yaml expands to too many"
    ):
        load_agent_bundle(_yaml_bundle(text))


def test_too_many_aliases_refused() -> None:
    refs = ", ".join(["*v"] * (MAX_YAML_ALIASES + 1))
    text = f"name: x\nexecutor: {{model: m}}\nv: &v 1\nmany: [{refs}]\n"
    with pytest.raises(
        InvalidInputError, match=r"^invalid agent bundle: YAML in agent\.yaml uses too many aliases"
    ):
        load_agent_bundle(_yaml_bundle(text))


def test_too_many_nodes_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_YAML_NODES", 50)
    text = "name: x\nexecutor: {model: m}\nitems: [" + ", ".join(["1"] * 60) + "]\n"
    with pytest.raises(InvalidInputError, match=r"YAML in agent\.yaml has too many nodes \(more than 50\)"):
        load_agent_bundle(_yaml_bundle(text))


def test_recursive_alias_refused() -> None:
    text = "name: x\nexecutor: {model: m}\nloop: &l [*l]\n"
    with pytest.raises(InvalidInputError, match="refers to itself"):
        load_agent_bundle(_yaml_bundle(text))


def test_deep_nesting_refused() -> None:
    text = "name: x\nexecutor: {model: m}\ndeep: " + "[" * 5000 + "]" * 5000 + "\n"
    with pytest.raises(InvalidInputError, match="nests deeper than"):
        load_agent_bundle(_yaml_bundle(text))


def test_multi_document_yaml_refused() -> None:
    text = MINIMAL_YAML.format(name="a") + "---\n" + MINIMAL_YAML.format(name="b")
    with pytest.raises(InvalidInputError, match="single document"):
        load_agent_bundle(_yaml_bundle(text))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "is empty"),
        ("- a\n- b\n", "the top level must be a mapping, got a list"),
        (
            "executor: {model: m}\n",
            r"^invalid agent bundle: missing required field 'name' \(in agent\.yaml\)$",
        ),
        ("name: x\n", r"executor: Field required"),
        ("name: x\nexecutor: {}\n", r"executor\.model: Field required"),
        ("name: x\nexecutor: {model: m, harness: claude}\n", r"executor\.harness: harness 'claude' is not"),
        ("name: 'bad name!'\nexecutor: {model: m}\n", r"^invalid agent bundle: name: String should match"),
        ("name: x\nexecutor: {model: m}\nbig: " + "9" * 5000 + "\n", "cannot be loaded"),
        ("name: x\nexecutor: {model: m}\nblob: !!binary aGVsbG8=\n", "unsupported binary value at blob"),
        ("name: x\nexecutor: {model: m}\nn: .inf\n", "non-finite number at n"),
        (
            "name: x\nexecutor: {model: m}\nobj: !!python/object:os.system {}\n",
            "could not determine a constructor",
        ),
        ("name: x\n\tbad: tab\n", r"syntax error at line 2, column 1"),
        ("name: x\nexecutor: {model: m}\nk: *nope\n", "found undefined alias 'nope'"),
        ("name: x\nexecutor: {model: m}\ns: !!set {a, b}\n", "unsupported set value at s"),
        ("name: x\nbell: \x07\n", "unacceptable character at position"),
    ],
)
def test_bad_yaml_or_spec(text: str, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match) as caught:
        load_agent_bundle(_yaml_bundle(text))
    assert caught.value.message.startswith("invalid agent bundle: ")


def test_invalid_utf8_yaml_refused() -> None:
    with pytest.raises(InvalidInputError, match="not valid UTF-8"):
        load_agent_bundle(build_bundle({"agent.yaml": b"name: \xff\xfa\n"}))


@pytest.mark.parametrize(
    "text",
    [
        # The secret sits on the line with the syntax error.
        f"name: x\nexecutor:\n  model: m\n  auth: {{api_key: {SECRET}: oops}}\n",
        # Wrong type for the secret itself.
        f"name: x\nexecutor:\n  model: m\n  auth:\n    api_key: [{SECRET}]\n",
        # An unknown key beside the secret.
        f"name: x\nexecutor:\n  model: m\n  auth:\n    api_key: {SECRET}\n    base_url: ftp://nope\n    extra: 1\n",
        # A literal mismatch next to it.
        f"name: x\nexecutor:\n  model: m\n  auth: {{type: {SECRET}, api_key: {SECRET}}}\n",
    ],
    ids=["syntax", "type", "extra", "literal"],
)
def test_secrets_never_echoed(text: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        load_agent_bundle(_yaml_bundle(text))
    assert SECRET not in caught.value.message
    assert SECRET not in str(caught.value)
    assert caught.value.__cause__ is None


def test_validation_error_lists_field_paths() -> None:
    text = "name: x\nexecutor:\n  model: m\n  auth:\n    api_key: k\n    base_url: ftp://x\n    extra: 1\n"
    with pytest.raises(InvalidInputError) as caught:
        load_agent_bundle(_yaml_bundle(text))
    message = caught.value.message
    assert "executor.auth.base_url: base_url must be an http(s) URL" in message
    assert "executor.auth.extra: Extra inputs are not permitted" in message


def test_load_agent_spec_dict() -> None:
    spec = load_agent_spec_dict({"name": "json-agent", "executor": {"model": "m"}, "policies": [1]})
    assert spec.name == "json-agent"
    assert spec.model_extra == {"policies": [1]}
    with pytest.raises(InvalidInputError, match=r"^invalid agent spec: unknown key 'x'"):
        load_agent_spec_dict({"name": "json-agent", "executor": {"model": "m"}, "x": 1})
    with pytest.raises(InvalidInputError, match=r"^invalid agent spec: missing required field 'name'$"):
        load_agent_spec_dict({"executor": {"model": "m"}})
    with pytest.raises(InvalidInputError, match=r"^invalid agent spec: the top level must be a mapping"):
        load_agent_spec_dict(["name"])
    with pytest.raises(InvalidInputError, match=r"^invalid agent spec: executor\.model: Field required$"):
        load_agent_spec_dict({"name": "a", "executor": {"auth": {"api_key": SECRET}}})


# --------------------------------------------------------------------------
# multipart/form-data
# --------------------------------------------------------------------------


def _form(
    data: dict[str, str] | None = None, files: dict[str, tuple[str, bytes, str]] | None = None
) -> tuple[bytes, str]:
    request = httpx.Request("POST", "http://skyloop.local/v1/sessions", data=data, files=files)
    return request.read(), request.headers["content-type"]


def test_multipart_with_field_and_file() -> None:
    # Binary content full of CR/LF and dashes must survive byte-for-byte.
    payload = os.urandom(64 * 1024) + b"\r\n--\r\n\r\n\n\r"
    body, content_type = _form({"metadata": "{}"}, {"bundle": ("agent.tar.gz", payload, "application/gzip")})
    form = parse_multipart_form(body, content_type)
    assert form.fields == {"metadata": "{}"}
    upload = form.files["bundle"]
    assert upload.filename == "agent.tar.gz"
    assert upload.content_type == "application/gzip"
    assert upload.data == payload


def test_multipart_end_to_end_with_real_bundle() -> None:
    bundle = _yaml_bundle(AGENT_YAML)
    body, content_type = _form(
        {"metadata": '{"title": "t"}'}, {"bundle": ("agent.tar.gz", bundle, "application/gzip")}
    )
    form = parse_multipart_form(body, content_type)
    assert parse_session_metadata(form.fields["metadata"]).title == "t"
    assert load_agent_bundle(form.files["bundle"].data).name == "coder"


def _raw_form(parts: list[bytes], boundary: str = "XyZ123") -> tuple[bytes, str]:
    body = b"".join(b"--" + boundary.encode() + b"\r\n" + part + b"\r\n" for part in parts)
    return body + b"--" + boundary.encode() + b"--\r\n", f"multipart/form-data; boundary={boundary}"


def test_multipart_unicode_filename_and_untitled_binary_part() -> None:
    body, content_type = _raw_form(
        [
            'Content-Disposition: form-data; name="bundle"; filename="agënt.tgz"\r\n\r\n'.encode()
            + b"\x00\xff",
            b'Content-Disposition: form-data; name="blob"\r\nContent-Type: application/gzip\r\n\r\n\x1f\x8b',
            b'Content-Disposition: form-data; name="note"\r\n\r\nh\xc3\xa9',
        ]
    )
    form = parse_multipart_form(body, content_type)
    assert form.files["bundle"].filename == "agënt.tgz"
    assert form.files["bundle"].data == b"\x00\xff"
    assert form.files["blob"].filename is None
    assert form.files["blob"].data == b"\x1f\x8b"
    assert form.fields == {"note": "hé"}


@pytest.mark.parametrize(
    ("body", "content_type", "match"),
    [
        (b"--x\r\n\r\n--x--", "multipart/form-data", "no boundary"),
        (b"x", "multipart/form-data; boundary=" + "a" * 71, "not a valid RFC 2046 boundary"),
        (b"\x00\x01 complete garbage \xff", "multipart/form-data; boundary=abc", "boundary never appears"),
        (
            b'--abc\r\nContent-Disposition: form-data; name="a"\r\n\r\npartial',
            "multipart/form-data; boundary=abc",
            "no closing boundary",
        ),
        (b"", "multipart/form-data; boundary=abc\r\nX-Injected: 1", "invalid Content-Type"),
        (b"", "multipart/form-data; boundary=é", "not ASCII"),
    ],
    ids=["missing-boundary", "long-boundary", "garbage", "truncated", "header-injection", "non-ascii"],
)
def test_multipart_malformed(body: bytes, content_type: str, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        parse_multipart_form(body, content_type)


@pytest.mark.parametrize(
    ("parts", "match"),
    [
        ([b'Content-Disposition: form-data; name="a"\r\n\r\n1'] * 2, "repeats the field 'a'"),
        ([b"Content-Disposition: form-data\r\n\r\n1"], "has no field name"),
        ([b"Content-Type: text/plain\r\n\r\n1"], "no 'Content-Disposition: form-data'"),
        ([b'Content-Disposition: form-data; name="a"\r\n\r\n\xff\xfe'], "'a' is not valid utf-8 text"),
        ([b'Content-Disposition: form-data; name="a"\r\n\r\n1'] * 17, "at most 16 are accepted"),
    ],
    ids=["duplicate", "no-name", "no-disposition", "bad-utf8", "too-many-parts"],
)
def test_multipart_bad_parts(parts: list[bytes], match: str) -> None:
    body, content_type = _raw_form(parts)
    with pytest.raises(InvalidInputError, match=match):
        parse_multipart_form(body, content_type)


def test_multipart_wrong_media_type() -> None:
    with pytest.raises(UnsupportedMediaTypeError, match="expected multipart/form-data, got application/json"):
        parse_multipart_form(b"{}", "application/json")


def test_multipart_body_too_large() -> None:
    with pytest.raises(PayloadTooLargeError):
        parse_multipart_form(bytes(MAX_REQUEST_BYTES + 1), "multipart/form-data; boundary=abc")


# --------------------------------------------------------------------------
# Session metadata
# --------------------------------------------------------------------------


def test_metadata_empty_object() -> None:
    metadata = parse_session_metadata("{}")
    assert metadata == SessionMetadata()
    assert metadata.labels == {}
    assert metadata.title is None


def test_metadata_fields_and_ignored_omnigent_fields() -> None:
    metadata = parse_session_metadata(
        '{"title": "T", "labels": {"team": "core"}, "reasoning_effort": "high", "host_id": "h",'
        ' "workspace": {"path": "/w"}, "terminal_launch_args": ["-x"], "parent_session_id": null}'
    )
    assert metadata.title == "T"
    assert metadata.labels == {"team": "core"}
    assert metadata.model_dump() == {"title": "T", "labels": {"team": "core"}}
    assert parse_session_metadata('{"labels": null}').labels == {}


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('{"bogus": 1}', r"bogus: Extra inputs are not permitted"),
        ("{not json", "not valid JSON"),
        ("", "not valid JSON"),
        ("[]", "expected a JSON object, got a list"),
        ('{"title": 5}', r"title: Input should be a valid string"),
        ('{"title": "' + "t" * 513 + '"}', r"title: String should have at most 512"),
        ('{"labels": {"k": 1}}', r"labels\.k: Input should be a valid string"),
        ('{"labels": {"k": "' + "v" * 257 + '"}}', r"labels\.k: String should have at most 256"),
        ('{"labels": {"": "v"}}', r"labels\[''\]\[key\]: String should have at least 1"),
        (
            json.dumps({"labels": {f"k{i}": "v" for i in range(51)}}),
            "labels: Dictionary should have at most 50",
        ),
        ("[" * 30_000 + "]" * 30_000, "nests too deeply"),
    ],
)
def test_metadata_refused(text: str, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match) as caught:
        parse_session_metadata(text)
    assert caught.value.message.startswith("invalid session metadata: ")
