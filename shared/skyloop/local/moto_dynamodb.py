"""Make moto's DynamoDB safe to call from many threads, and as cheap as what a request touches.

moto's DynamoDB backend has no lock; its ``TransactWriteItems`` deep-copies
every touched table up front and puts the copy back when a condition fails
(that silently undoes other threads' writes and costs time in proportion to
the whole table); and its ``Query`` sorts and walks *every item of the table*
(base table and indexes alike) to find one partition. The local stack serves
requests on many threads and keeps a growing table, so :func:`install` patches
moto in place:

* every DynamoDB request runs under one lock (moto's state is not thread-safe;
  the lock is held only for moto's in-memory work, microseconds to a
  millisecond, never across I/O);
* transactions roll back only the items they touched (safe under that lock);
* a base-table Query reads only its partition, kept sorted by range key, and
  narrows it by the key condition and ``ExclusiveStartKey`` with bisection;
* a GSI Query reads only the items whose index hash key matches, from an index
  kept up to date by every put and update (stale entries are dropped on read);
* results that are plain JSON (every item read or write) are encoded with
  ``json.dumps`` instead of moto's generic shape-walking serializer, which costs
  more than the operation itself, after a one-pass conversion of the items'
  values (:func:`_plain_result`) instead of moto's generic recursive one;
* a parsed UpdateExpression is kept per expression text, with a pickle of it:
  moto's validator works on its own copy of the tree (so the kept tree is
  never changed), which is unpickled instead of deep-copied (5x cheaper); the
  handler's own validation pass reads the same kept tree;
* the validator's tree walkers list the node classes they process once per
  walker class (moto rebuilds that tuple from a fresh dict at every node),
  and whether a node's class is one of them is answered once per class
  (the classes are abstract: every ``isinstance`` went through ``ABCMeta``);
* a ConditionExpression's tokens are kept per expression text (lexing reads
  only the text; parsing them against the request's names and values is
  still moto's, per request);
* Query results are not deep-copied before they are serialized: the response
  is built from them under the same lock, into new objects, and nothing else
  can change them meanwhile;
* a data-plane request (GetItem, Query, TransactWriteItems...) goes straight to
  moto's DynamoDB handler (:func:`dispatch_fast`): moto's generic path builds a
  werkzeug request, matches URL patterns, walks the input shape to parse the
  JSON body and draws a 52-character random request id, which together cost
  three times the operation. The handler's action code, its lock and its
  errors are moto's own; only requests with binary attributes (which moto's
  parser base64-decodes) take the generic path.

Query semantics stay moto's own: the patch only hands moto's unchanged Query
code a smaller candidate list, and moto still applies every condition, filter,
limit and projection itself. Real DynamoDB needs none of this.
"""

from __future__ import annotations

import bisect
import copy
import functools
import json
import pickle
import threading
import uuid
from collections import defaultdict, deque
from typing import TYPE_CHECKING, Any, Protocol

from skyloop.local import aws_shortcut
from skyloop.local._patch import replace

if TYPE_CHECKING:
    from collections.abc import Callable

_lock = threading.RLock()
_candidates = threading.local()  # set only while one of our Query calls runs in this thread


class SortedPartition(dict[Any, Any]):
    """One partition (range key -> item) that also keeps its range keys in sort order."""

    def __init__(self) -> None:
        super().__init__()
        self.sort_keys: list[Any] = []  # the range keys' cast values, ascending
        self.range_keys: list[Any] = []  # the DynamoType range keys, in the same order

    def __setitem__(self, key: Any, value: Any) -> None:
        if key not in self:
            raw = key.cast_value
            at = bisect.bisect_left(self.sort_keys, raw)
            self.sort_keys.insert(at, raw)
            self.range_keys.insert(at, key)
        super().__setitem__(key, value)

    def _forget(self, key: Any) -> None:
        raw = key.cast_value
        at = bisect.bisect_left(self.sort_keys, raw)
        while at < len(self.sort_keys) and self.sort_keys[at] == raw:
            if self.range_keys[at] == key:
                del self.sort_keys[at], self.range_keys[at]
                return
            at += 1

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        self._forget(key)

    def pop(self, key: Any, *default: Any) -> Any:
        if key in self:
            self._forget(key)
        return super().pop(key, *default)

    def __deepcopy__(self, memo: dict[int, Any]) -> SortedPartition:
        out = SortedPartition()
        for key, value in self.items():
            out[copy.deepcopy(key, memo)] = copy.deepcopy(value, memo)
        return out

    def bounds(self, comparison: str | None, values: list[Any]) -> tuple[int, int]:
        """Index range ``[lo, hi)`` of the keys that can satisfy a key condition."""
        keys, n = self.sort_keys, len(self.sort_keys)
        raw = [v.cast_value for v in values]
        if comparison is None:
            return 0, n
        op = comparison.upper()
        if op in ("EQ", "="):
            return bisect.bisect_left(keys, raw[0]), bisect.bisect_right(keys, raw[0])
        if op in ("LT", "<"):
            return 0, bisect.bisect_left(keys, raw[0])
        if op in ("LE", "<="):
            return 0, bisect.bisect_right(keys, raw[0])
        if op in ("GT", ">"):
            return bisect.bisect_right(keys, raw[0]), n
        if op in ("GE", ">="):
            return bisect.bisect_left(keys, raw[0]), n
        if op == "BETWEEN":
            return bisect.bisect_left(keys, raw[0]), bisect.bisect_right(keys, raw[1])
        if op == "BEGINS_WITH" and isinstance(raw[0], (str, bytes)):
            lo = hi = bisect.bisect_left(keys, raw[0])
            while hi < n and keys[hi][: len(raw[0])] == raw[0]:
                hi += 1
            return lo, hi
        return 0, n


def _partition_candidates(
    table: Any,
    hash_key: Any,
    comparison: str | None,
    values: list[Any],
    exclusive_start_key: dict[str, Any] | None,
    forward: bool,
) -> list[Any] | None:
    partition = table.items.get(hash_key)
    if partition is None:
        return []
    if not isinstance(partition, SortedPartition):
        return None
    lo, hi = partition.bounds(comparison, values)
    if exclusive_start_key and table.range_key_attr in exclusive_start_key:
        from moto.dynamodb.models.dynamo_type import DynamoType

        start = DynamoType(exclusive_start_key[table.range_key_attr]).cast_value
        if forward:
            lo = max(lo, bisect.bisect_right(partition.sort_keys, start))
        else:
            hi = min(hi, bisect.bisect_left(partition.sort_keys, start))
    return [partition[k] for k in partition.range_keys[lo:hi]]


def _gsi_hash_attr(index: Any) -> str | None:
    hashes = [k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"]
    return hashes[0] if len(hashes) == 1 else None


def _gsi_entries(table: Any) -> dict[str, defaultdict[Any, set[tuple[Any, Any]]]]:
    """Per GSI: index hash value -> primary keys that had it when written (built once, lazily)."""
    entries = getattr(table, "_skyloop_gsi", None)
    if entries is None:
        entries = {}
        for index in table.global_indexes or []:
            attr = _gsi_hash_attr(index)
            if attr is None:
                continue
            by_value: defaultdict[Any, set[tuple[Any, Any]]] = defaultdict(set)
            for item in _ORIGINAL["all_items"](table):
                if attr in item.attrs:
                    by_value[item.attrs[attr]].add((item.hash_key, item.range_key))
            entries[index.name] = by_value
        table._skyloop_gsi = entries
    return entries


def _remember_gsi(table: Any, item: Any) -> None:
    entries = getattr(table, "_skyloop_gsi", None)
    if entries is None or item is None:
        return  # not built yet: the first GSI query builds it from the whole table once
    for index in table.global_indexes or []:
        attr = _gsi_hash_attr(index)
        if attr is not None and attr in item.attrs and index.name in entries:
            entries[index.name][item.attrs[attr]].add((item.hash_key, item.range_key))


def _gsi_candidates(table: Any, index_name: str, hash_key: Any, hash_conditions: Any) -> list[Any] | None:
    index = next((i for i in table.global_indexes or [] if i.name == index_name), None)
    if index is None:
        return None
    attr = _gsi_hash_attr(index)
    if attr is None:
        return None
    wanted = hash_key
    for name, value in hash_conditions or []:
        if name == attr:
            wanted = value
    if wanted is None:
        return None
    keys = _gsi_entries(table).get(index_name, {}).get(wanted)
    if not keys:
        return []
    out = []
    for key in list(keys):
        h, r = key
        partition = table.items.get(h)
        item = partition.get(r) if isinstance(partition, dict) and r is not None else partition
        value = item.attrs.get(attr) if item is not None and hasattr(item, "attrs") else None
        if value is None or value != wanted:
            keys.discard(key)  # deleted, or re-written under another index value
            continue
        out.append(item)
    return out


_ORIGINAL: dict[str, Callable[..., Any]] = {}
FAST_TARGET = "DynamoDB_20120810."
FAST_OPERATIONS = aws_shortcut.DATA_PLANE_OPERATIONS
_BINARY = aws_shortcut.BINARY_VALUE  # binary values: moto's parser base64-decodes them, the generic path


class _Headers:
    """What moto's region lookup reads of a request."""

    def __init__(self, headers: Any) -> None:
        self.headers = headers


def dispatch_fast(url: str, headers: Any, body: bytes | str | None) -> Any:
    """Serve a data-plane DynamoDB request with moto's handler, skipping its generic HTTP layer.

    Returns moto's ``(status, headers, body)``, or None when the request is not
    one this path serves (the caller then takes moto's generic path). Sets on
    the handler what moto's ``setup_class`` would for a JSON request; the body
    is parsed with ``json.loads``, which for these operations equals moto's
    shape-walking parser except on binary attributes, which are excluded.
    """
    from botocore.awsrequest import HeadersDict
    from moto.dynamodb.responses import DynamoHandler
    from moto.utilities.utils import get_partition

    target = headers.get("X-Amz-Target") or ""
    if isinstance(target, bytes):
        target = target.decode()
    if not target.startswith(FAST_TARGET) or target[len(FAST_TARGET) :] not in FAST_OPERATIONS:
        return None
    if isinstance(body, str):
        body = body.encode()
    body = body or b"{}"
    if _BINARY.search(body):
        return None
    try:
        params = json.loads(body)
    except ValueError:
        return None
    if not isinstance(params, dict):
        return None
    text_headers = HeadersDict()  # case-insensitive, str values (what moto's request gives a handler)
    for key, value in headers.items():
        text_headers[key] = value.decode() if isinstance(value, bytes) else str(value)
    handler = DynamoHandler()
    handler.is_werkzeug_request = False
    handler.headers = text_headers
    handler.querystring = {}
    handler.data = handler.querystring
    handler.uri = url
    handler.path = handler.raw_path = "/"
    handler.method = "POST"
    handler.uri_match = {}
    handler.raw_body = body
    handler.body = body.decode()
    handler.params = params
    handler.region = handler.get_region_from_url(_Headers(text_headers), url)
    handler.partition = get_partition(handler.region)
    handler.response_headers = {"server": "amazon.com"}
    handler.access_key = handler.get_access_key()
    handler.current_account = handler.get_current_account()
    return serve(handler, _ACTIONS[target[len(FAST_TARGET) :]])


_ACTIONS = {
    op: "".join("_" + c.lower() if c.isupper() else c for c in op).lstrip("_") for op in FAST_OPERATIONS
}


def serve(handler: Any, action: str) -> tuple[int, dict[str, str], str]:
    """moto's ``DynamoHandler.call_action`` for one data-plane action, without its generic steps.

    The same lock, authorization hook, action method and error serialization;
    a plain-JSON result is encoded with ``json.dumps`` (as :func:`install`
    makes moto do anyway) instead of going through moto's operation-model
    lookup, request-id regex over the body and CRC32 header.
    """
    from moto.core.exceptions import ServiceException
    from moto.core.responses import ActionResult
    from moto.dynamodb.responses import DynamoResult
    from werkzeug.exceptions import HTTPException

    handler.body = handler.params  # what DynamoHandler.call_action does first
    headers: dict[str, str] = {}
    ticket = None
    with _lock:
        try:
            handler._authenticate_and_authorize_normal_action("*")
            result = getattr(handler, action)()
            body: Any = None
            if type(result) is DynamoResult:
                try:
                    body = json.dumps(result.result, separators=(",", ":"))
                    status, headers = 200, {"Content-Type": "application/x-amz-json-1.0"}
                except (TypeError, ValueError):
                    body = None
            if body is None and isinstance(result, ActionResult):
                status, headers, body = handler.serialized(result)
            elif body is None:  # a handler that answers with a string or a tuple, as moto allows
                status, headers, body = (
                    (200, {}, result) if isinstance(result, str) else handler._transform_response({}, result)
                )
        except ServiceException as exc:
            status, headers, body = handler.serialized(ActionResult(exc))
        except HTTPException as exc:  # what moto's call_action makes of one
            status, headers, body = int(exc.code or 500), dict(exc.get_headers() or []), exc.description
        if _observers:
            ticket = _observers[0].end_request(_deferred(handler.headers))
    if ticket is not None:
        failure = _settle(ticket)
        if failure is not None:
            status, headers, body = failure
    headers.update(handler.response_headers)
    _fast_request_id(headers)
    return status, headers, body


def _fast_request_id(_headers: dict[str, str] | None = None) -> str:
    """moto's ``gen_amzn_requestid_long`` without 52 calls to ``random.choice`` (same header)."""
    request_id = uuid.uuid4().hex.upper() + uuid.uuid4().hex.upper()[:20]
    if isinstance(_headers, dict):
        _headers["x-amzn-requestid"] = request_id
    return request_id


class RequestObserver(Protocol):
    """Told about every DynamoDB request moto served here (the data directory's journal)."""

    def end_request(self, deferred: bool = False) -> int | None:
        """Called under the DynamoDB lock as a request ends; returns what :meth:`wait` must see settled.

        ``deferred``: the request asked not to wait (see ``skyloop.local.persistence.dynamodb``).
        """
        ...

    def wait(self, ticket: int) -> None:
        """Called after the lock is released; returns once the request's effects are durable."""
        ...


_observers: list[RequestObserver] = []


def observe(observer: RequestObserver) -> Callable[[], None]:
    """Have ``observer`` see every request from now on; returns the undo."""
    _observers[:] = [observer]
    return _observers.clear


def _deferred(headers: Any) -> bool:
    """Whether a request carries ``X-Skyloop-Sync: deferred`` (its answer need not wait for the disk)."""
    try:
        value = headers.get("X-Skyloop-Sync") or headers.get("x-skyloop-sync")
    except AttributeError:
        return False
    return value in ("deferred", b"deferred")


def _settle(ticket: int) -> tuple[int, dict[str, str], str] | None:
    """Wait until what a request wrote or read is durable; an error answer if it cannot be."""
    try:
        _observers[0].wait(ticket) if _observers else None
    except Exception as exc:  # the data directory cannot be written: the answer must not be a 2xx
        body = json.dumps({"__type": "InternalFailure", "message": str(exc)})
        return 500, {"Content-Type": "application/x-amz-json-1.0"}, body
    return None


_SUBCLASSES: dict[tuple[Any, Any], bool] = {}


def _is_a(cls: Any, bases: Any) -> bool:
    """``issubclass``, remembered: moto's tree nodes are abstract classes, slow to ``isinstance``."""
    found = _SUBCLASSES.get((cls, bases))
    if found is None:
        found = _SUBCLASSES[cls, bases] = issubclass(cls, bases)
    return found


def _copy_ast(value: Any, memo: Any = None) -> Any:
    """The validator's private copy of an UpdateExpression tree: unpickled when the tree is a cached one.

    Equal to ``copy.deepcopy`` for these trees (plain objects, no copy hooks), five times cheaper.
    """
    frozen = getattr(value, "_skyloop_frozen", None)
    if isinstance(frozen, bytes):
        return pickle.loads(frozen)
    return copy.deepcopy(value, memo)


_PLAIN_TYPES = frozenset({"S", "N", "BOOL", "NULL"})
_PLAIN_SETS = frozenset({"SS", "NS"})


def _plain_result(obj: Any) -> Any:
    """moto's ``dynamo_to_dict`` for what items hold, in one pass of exact type checks.

    moto's converter asks ``isinstance`` (datetime, DynamoType), then
    ``hasattr(to_json)`` of every value, recursively: for a Query that returns a
    long conversation it cost more than the Query. Strings, numbers, booleans,
    nulls, their sets, maps and lists are converted here to the same ``{type:
    value}`` form; anything else (binary values, datetimes, model objects) is
    handed to moto's own converter.
    """
    from moto.dynamodb.models.dynamo_type import DynamoType

    kind = type(obj)
    if kind is DynamoType:
        tag = obj.type
        if tag in _PLAIN_TYPES:
            return {tag: obj.value}
        if tag in _PLAIN_SETS:
            return {tag: list(obj.value)}
        if tag == "M":
            return {"M": {k: _plain_result(v) for k, v in obj.value.items()}}
        if tag == "L":
            return {"L": [_plain_result(v) for v in obj.value]}
    elif kind is dict or isinstance(obj, dict):  # an item's attributes are a dict subclass
        return {k: _plain_result(v) for k, v in obj.items()}
    elif kind is list:
        return [_plain_result(v) for v in obj]
    elif kind is str or kind is int or kind is float or kind is bool or obj is None:
        return obj
    return _ORIGINAL["to_dict"](obj)


class _NoDeepCopy:
    """Stands in for the ``copy`` module inside moto's Query (see the module docstring)."""

    copy = staticmethod(copy.copy)

    @staticmethod
    def deepcopy(value: Any, _memo: Any = None) -> Any:
        return value


def install() -> Callable[[], None]:  # noqa: C901  (the patch set is one unit with one undo)
    """Patch moto's DynamoDB as the module docstring says; returns the undo."""
    import moto.core.responses as core_responses
    import moto.dynamodb.models as models
    import moto.dynamodb.models.table as table_module
    import moto.dynamodb.parsing.validators as validators
    import moto.dynamodb.responses as responses_module
    from moto.core.botocore_stubber import BotocoreStubber
    from moto.dynamodb.comparisons import ConditionExpressionParser
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table
    from moto.dynamodb.parsing.ast_nodes import (  # type: ignore[attr-defined]
        DepthFirstTraverser,
        Expression,
        Node,
        UpdateExpressionFunction,
    )
    from moto.dynamodb.responses import DynamoHandler, DynamoResult

    if _ORIGINAL:
        return lambda: None  # already installed in this process
    _ORIGINAL.update(
        call_action=DynamoHandler.call_action,
        transact=DynamoDBBackend.transact_write_items,
        update_item=DynamoDBBackend.update_item,
        table_init=Table.__init__,
        put_item=Table.put_item,
        query=Table.query,
        all_items=Table.all_items,
        execute_result=DynamoResult.execute_result,
        parser=models.UpdateExpressionParser,
        lex=ConditionExpressionParser._lex_condition_expression,
        node_types=DepthFirstTraverser.nodes_to_be_processed,
        traverse=DepthFirstTraverser.traverse_node_recursively,
        find_clauses=Node.find_clauses,
        process_request=BotocoreStubber.process_request,
        request_id=core_responses.gen_amzn_requestid_long,
        to_dict=responses_module.dynamo_to_dict,
    )

    @functools.wraps(_ORIGINAL["process_request"])
    def process_request(self: Any, request: Any) -> Any:
        url = request.url
        if aws_shortcut.is_dynamodb(request.method, url):
            response = dispatch_fast(url, request.headers, request.body)
            if response is not None:
                return response
        return _ORIGINAL["process_request"](self, request)

    parser_class: Any = _ORIGINAL["parser"]

    @functools.lru_cache(maxsize=4096)
    def parse_update(expression: str) -> Any:
        ast = parser_class.make(expression)
        ast._skyloop_frozen = pickle.dumps(ast, pickle.HIGHEST_PROTOCOL)  # after the dump: copies lack it
        return ast

    @functools.lru_cache(maxsize=4096)
    def lex_condition(expression: str) -> tuple[Any, ...]:
        # lexing reads only the text; the parser's later phases build new nodes, never change these
        return tuple(_ORIGINAL["lex"](ConditionExpressionParser(expression, None, None)))

    def lex(self: Any) -> Any:
        return deque(lex_condition(self.condition_expression))

    node_types: dict[type, tuple[type, ...]] = {}

    def nodes_to_be_processed(self: Any) -> tuple[type, ...]:
        found = node_types.get(type(self))
        if found is None:  # every processor's map has fixed keys: one tuple per class
            found = node_types[type(self)] = _ORIGINAL["node_types"](self)
        return found

    base_pre = DepthFirstTraverser.pre_processing_of_child

    def traverse_node_recursively(self: Any, node: Any, child_id: int = -1) -> Any:
        # moto's walk (children first, then the node if the processor takes its type), with its
        # isinstance checks against abstract classes answered per type, the processor's types
        # looked up once per walk and its child hook called only where a processor has one: each
        # update is walked by ten processors, and the walk was a quarter of a transaction's CPU
        pre = None if type(self).pre_processing_of_child is base_pre else self.pre_processing_of_child
        return _walk(self, node, child_id, self.nodes_to_be_processed(), pre)

    def _walk(self: Any, node: Any, child_id: int, types: tuple[type, ...], pre: Any) -> Any:
        cls = type(node)
        if not _is_a(cls, Node):
            return node
        parent_node = node.parent
        children = node.children
        if children is not None:
            for i, child_node in enumerate(children):
                if pre is not None:
                    pre(node, i)
                _walk(self, child_node, i, types, pre)
        if _is_a(cls, types):
            node = self.process(node)
            node.parent = parent_node
            if parent_node:
                parent_node.children[child_id] = node
        return node

    def find_clauses(self: Any, clause_types: Any) -> list[Any]:
        clauses = []
        for child in self.children or []:
            if type(child) in clause_types:
                clauses.append(child)
            elif _is_a(type(child), (Expression, UpdateExpressionFunction)):
                clauses.extend(child.find_clauses(clause_types))
        return clauses

    cached_parser = type(
        "CachedUpdateExpressionParser", (parser_class,), {"make": staticmethod(parse_update)}
    )

    @functools.wraps(_ORIGINAL["execute_result"])
    def execute_result(self: Any, context: Any) -> Any:
        try:
            body = json.dumps(self.result, separators=(",", ":"))
        except (TypeError, ValueError):  # e.g. a table description with datetimes
            return _ORIGINAL["execute_result"](self, context)
        return 200, {"Content-Type": "application/x-amz-json-1.0"}, body

    @functools.wraps(_ORIGINAL["call_action"])
    def call_action(self: Any) -> Any:
        ticket = None
        with _lock:
            try:
                result = _ORIGINAL["call_action"](self)
            finally:
                if _observers:
                    ticket = _observers[0].end_request(_deferred(self.headers))
        if ticket is not None:
            failure = _settle(ticket)
            if failure is not None:
                return failure
        return result

    @functools.wraps(_ORIGINAL["table_init"])
    def table_init(self: Any, *args: Any, **kwargs: Any) -> None:
        _ORIGINAL["table_init"](self, *args, **kwargs)
        if self.range_key_attr is not None:
            self.items = defaultdict(SortedPartition)

    @functools.wraps(_ORIGINAL["put_item"])
    def put_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        item = _ORIGINAL["put_item"](self, *args, **kwargs)
        _remember_gsi(self, item)
        return item

    @functools.wraps(_ORIGINAL["update_item"])
    def update_item(self: Any, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        item = _ORIGINAL["update_item"](self, table_name, key, *args, **kwargs)
        _remember_gsi(self.get_table(table_name), item)
        return item

    @functools.wraps(_ORIGINAL["all_items"])
    def all_items(self: Any) -> list[Any]:
        override = getattr(_candidates, "value", None)
        if override is not None and override[0] is self:
            return list(override[1])
        return list(_ORIGINAL["all_items"](self))

    @functools.wraps(_ORIGINAL["query"])
    def query(
        self: Any,
        hash_key: Any,
        range_comparison: str | None,
        range_objs: list[Any],
        limit: int,
        exclusive_start_key: dict[str, Any],
        scan_index_forward: bool,
        projection_expressions: Any,
        index_name: str | None = None,
        consistent_read: bool = False,
        filter_expression: Any = None,
        **kwargs: Any,
    ) -> Any:
        if index_name:
            found = _gsi_candidates(self, index_name, hash_key, kwargs.get("hash_key_conditions"))
        elif hash_key is not None and self.range_key_attr is not None:
            found = _partition_candidates(
                self, hash_key, range_comparison, range_objs, exclusive_start_key, scan_index_forward
            )
        else:
            found = None
        args = (hash_key, range_comparison, range_objs, limit, exclusive_start_key, scan_index_forward)
        rest = (projection_expressions, index_name, consistent_read, filter_expression)
        if found is None:
            return _ORIGINAL["query"](self, *args, *rest, **kwargs)
        _candidates.value = (self, found)
        replace(table_module, "copy", _NoDeepCopy)
        try:
            return _ORIGINAL["query"](self, *args, *rest, **kwargs)
        finally:
            replace(table_module, "copy", copy)
            _candidates.value = None

    patches: list[tuple[object, str, object]] = [
        (DynamoHandler, "call_action", call_action),
        (DynamoDBBackend, "transact_write_items", _transact_write_items),
        (DynamoDBBackend, "update_item", update_item),
        (Table, "__init__", table_init),
        (Table, "put_item", put_item),
        (Table, "query", query),
        (Table, "all_items", all_items),
        (DynamoResult, "execute_result", execute_result),
        (responses_module, "dynamo_to_dict", _plain_result),
        (models, "UpdateExpressionParser", cached_parser),
        (responses_module, "UpdateExpressionParser", cached_parser),
        (validators, "deepcopy", _copy_ast),
        (ConditionExpressionParser, "_lex_condition_expression", lex),
        (DepthFirstTraverser, "nodes_to_be_processed", nodes_to_be_processed),
        (DepthFirstTraverser, "traverse_node_recursively", traverse_node_recursively),
        (Node, "find_clauses", find_clauses),
        (BotocoreStubber, "process_request", process_request),
        (core_responses, "gen_amzn_requestid_long", _fast_request_id),
    ]
    previous = [(owner, name, replace(owner, name, value)) for owner, name, value in patches]

    def undo() -> None:
        for owner, name, value in reversed(previous):
            replace(owner, name, value)
        _ORIGINAL.clear()

    return undo


serialize_requests = install  # the name older callers use


def _transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:  # noqa: C901  (moto's own algorithm, kept in its shape)
    """moto's ``transact_write_items`` with an item-level undo log instead of whole-table copies."""
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        ConditionalCheckFailed,
        MockValidationException,
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )

    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    undo: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
    seen: set[tuple[str, str]] = set()
    errors: list[tuple[str | None, str | None, dict[str, Any] | None]] = []

    def rollback() -> None:
        for table_name, key, previous in reversed(undo):
            if previous is None:
                self.delete_item(table_name, key)
            else:
                self.put_item(table_name, previous)

    for item in transact_items:
        original_item: dict[str, Any] | None = None
        if len(item) > 1:
            raise TransactWriteSingleOpException
        try:
            op_type, op = next(iter(item.items()))
            if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                raise ValueError("Unsupported transaction operation")
            table_name = op["TableName"]
            names = op.get("ExpressionAttributeNames")
            values = op.get("ExpressionAttributeValues")
            if op_type == "Put":
                table = self.get_table(table_name)
                key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = op["Item"][table.range_key_attr]
            else:
                key = op["Key"]
            marker = (str(table_name), str(dict(sorted(key.items()))))
            if marker in seen:
                raise MultipleTransactionsException()
            seen.add(marker)
            current = self.get_item(table_name, key)
            condition = op.get("ConditionExpression")
            if condition is not None and not get_filter_expression(condition, names, values).expr(current):
                if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                    original_item = current.to_json()["Attributes"]
                raise ConditionalCheckFailed(item=original_item)
            if op_type != "ConditionCheck":
                undo.append((table_name, key, current.to_json()["Attributes"] if current else None))
            if op_type == "Put":
                self.put_item(
                    table_name,
                    op["Item"],
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            elif op_type == "Delete":
                self.delete_item(
                    table_name, key, expression_attribute_names=names, expression_attribute_values=values
                )
            elif op_type == "Update":
                self.update_item(
                    table_name,
                    key,
                    update_expression=op["UpdateExpression"],
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            rollback()
            raise
        except ConditionalCheckFailed as exc:
            errors.append(("ConditionalCheckFailed", str(exc.message), original_item))
        except Exception as exc:  # moto reports any other failure per item, too
            errors.append((type(exc).__name__, str(exc), original_item))
    if any(code is not None for code, _, _ in errors):
        rollback()
        raise TransactionCanceledException(errors)
