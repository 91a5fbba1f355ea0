"""A YAML loader that remembers where things are, so a spec problem can name its line.

``yaml.safe_load`` returns plain dicts and lists and forgets the source. cattrs reports problems by path
(``$.inputs[0].dtype``), so recording the line of every mapping key and sequence item under that same path
is enough to turn a path into ``file.yaml:LINE``. PyYAML also silently keeps the last of two equal keys;
a spec author almost always meant something else, so duplicates are recorded too.

PyYAML shares one node between an anchor and its aliases, so parsing and constructing stay linear; marking
walks every path, and nested aliases make the paths exponential (the "billion laughs" document: nine
levels of nine aliases stand for 9**9 nodes). The walk therefore has a budget: past ``ALIAS_BUDGET`` nodes
reached again through aliases, the document is refused before anything else reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

import attrs
import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

#: a path into the document: mapping keys and sequence indexes, from the root
Location = tuple[Union[str, int, Any], ...]

_MERGE_TAG = "tag:yaml.org,2002:merge"

#: stands for a key that cannot be part of a location (``null: x`` has the key None, which can)
_NO_KEY = object()

#: nodes the marker may visit again through aliases: a spec that reuses a few tensors through anchors needs
#: hundreds; beyond this the document is refused rather than expanded
ALIAS_BUDGET = 10_000


class AliasExpansionError(yaml.YAMLError):
    """Aliases expand the document past ``ALIAS_BUDGET`` nodes. ``location`` is the alias where the budget
    ran out, ``line`` the line its parent was written on."""

    def __init__(self, message: str, location: Location, line: int) -> None:
        super().__init__(message)
        self.message = message
        self.location = location
        self.line = line


@attrs.frozen
class Duplicate:
    """Key ``location[-1]`` appears twice in one mapping: first at ``first_line``, again at ``line``."""

    location: Location
    line: int
    first_line: int


class MarkedLoader(yaml.SafeLoader):
    """SafeLoader recording the 1-based line of every mapping key and sequence item, by location.

    It constructs exactly what ``yaml.safe_load`` does; the marks are a side table in ``lines``.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.lines: dict[Location, int] = {}
        self.duplicates: list[Duplicate] = []
        self._anchors: dict[int, str] = {}  # id(node) -> its anchor's name, for messages
        self._seen: set[int] = set()
        self._revisited = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        peek: Callable[[], Any] = self.peek_event  # PyYAML's stubs leave it untyped
        event = peek()
        node = super().compose_node(parent, index)
        if not isinstance(event, AliasEvent) and getattr(event, "anchor", None):
            self._anchors[id(node)] = event.anchor
        return node

    def construct_document(self, node: Node) -> Any:
        self._mark(node, (), set(), None)
        return super().construct_document(node)

    def _mark(
        self, node: Node, location: Location, active: set[int], alias: tuple[Location, Node] | None
    ) -> None:
        """``alias``: where this walk entered a node it had marked before (an alias), and that node."""
        # A key's own line wins over its value's: "dims:" is where an author looks, not the next line.
        self.lines.setdefault(location, node.start_mark.line + 1)
        if id(node) in active:  # a recursive alias (&a [*a]); its items are already marked
            return
        active = active | {id(node)}
        if id(node) in self._seen:
            alias = (location, node) if alias is None else alias
            self._revisited += 1
            if self._revisited > ALIAS_BUDGET:
                raise self._overflow(alias)
        else:
            self._seen.add(id(node))
        if isinstance(node, MappingNode):
            self._note_duplicates(node, location)
            self.flatten_mapping(node)  # resolve "<<" merge keys as the constructor will (idempotent)
            for key_node, value_node in node.value:
                key = self._key(key_node)
                if key is _NO_KEY:
                    continue
                self.lines[(*location, key)] = key_node.start_mark.line + 1
                self._mark(value_node, (*location, key), active, alias)
        elif isinstance(node, SequenceNode):
            for index, item in enumerate(node.value):
                self._mark(item, (*location, index), active, alias)

    def _overflow(self, alias: tuple[Location, Node]) -> AliasExpansionError:
        location, node = alias
        # An alias has no mark of its own (it is its anchor's node), so the line is its parent's.
        line = self.lines.get(location[:-1], 1)
        anchor = self._anchors.get(id(node))
        where = node.start_mark.line + 1
        what = f"*{anchor} (anchored at line {where})" if anchor else f"the node written at line {where}"
        return AliasExpansionError(
            f"YAML aliases expand this document to more than {ALIAS_BUDGET} nodes; the budget ran out at "
            f"{what}. A spec needs far fewer: a 'billion laughs' document is refused, not expanded",
            location,
            line,
        )

    def _note_duplicates(self, node: MappingNode, location: Location) -> None:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:  # keys merged in may be overridden on purpose
                continue
            key = self._key(key_node)
            if key is _NO_KEY:
                continue
            line = key_node.start_mark.line + 1
            if key in seen:
                self.duplicates.append(Duplicate((*location, key), line, seen[key]))
            else:
                seen[key] = line

    def _key(self, key_node: Node) -> Any:
        """The constructed key, or _NO_KEY for keys that cannot index a location (the constructor rejects
        unhashable keys with its own error)."""
        if not isinstance(key_node, ScalarNode):
            return _NO_KEY
        key = self.construct_object(key_node)
        try:
            hash(key)
        except TypeError:
            return _NO_KEY
        return key


@attrs.frozen
class MarkedDocument:
    """A parsed YAML document and where each of its parts was written."""

    data: Any
    lines: dict[Location, int]
    duplicates: tuple[Duplicate, ...] = ()

    def line_of(self, location: Location) -> int:
        """The line of ``location``, or of its nearest ancestor that was written (a missing key's problem
        belongs to the mapping that lacks it); 1 for the document itself."""
        for end in range(len(location), -1, -1):
            line = self.lines.get(tuple(location[:end]))
            if line is not None:
                return line
        return 1


def load_marked(text: str) -> MarkedDocument:
    """Parse one YAML document safely; yaml.YAMLError (with its own mark) on bad YAML."""
    loader = MarkedLoader(text)
    try:
        data = loader.get_single_data()
    finally:
        loader.dispose()
    return MarkedDocument(data, dict(loader.lines), tuple(loader.duplicates))
