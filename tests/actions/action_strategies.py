"""Hypothesis strategies for valid actions, responses and noisy model text."""

from __future__ import annotations

import itertools
import re
import string

from hypothesis import strategies as st

from workers.actions import Action, ApiActionSpec, Convention, Point
from workers.actions.osworld import KEYBOARD_KEYS
from workers.actions.parse import COORDINATE_LIMITS, split_keys
from workers.actions.serialize import format_response

API_ACTIONS = {
    "open_url": ApiActionSpec(params=("url", "new_tab")),
    "set_value": ApiActionSpec(params=("element", "value"), required=("element",)),
}
DIRECTIONS = ("up", "down", "left", "right")
POINTER_KINDS = ("click", "left_double", "right_single", "hover", "long_press")
COMMON_KEYS = (
    "ctrl",
    "shift",
    "alt",
    "enter",
    "tab",
    "a",
    "c",
    "v",
    "f5",
    "pagedown",
    "+",
    ",",
    "'",
    '"',
    "\\",
)
_ACTION_LINE = re.compile(r"^[ \t]*Action[ \t]*:", re.MULTILINE)


def coordinate(limit: float) -> st.SearchStrategy[float]:
    whole = st.integers(min_value=0, max_value=int(limit)).map(float)
    return whole | st.floats(min_value=0, max_value=limit, allow_nan=False, allow_infinity=False)


def points(convention: Convention = Convention.ABSOLUTE_RESIZED) -> st.SearchStrategy[Point]:
    limit = COORDINATE_LIMITS.get(convention, 10_000)
    return st.builds(Point, coordinate(limit), coordinate(limit))


_FREE_KEY = st.text(alphabet=string.ascii_letters + string.digits + "_-.'\"\\/", min_size=1, max_size=8)
KEYS = (
    st.lists(st.sampled_from(COMMON_KEYS) | _FREE_KEY, min_size=1, max_size=4)
    .map(tuple)
    .filter(lambda k: split_keys(" ".join(k)) == k)
)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**12), max_value=10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
JSON_OBJECTS = st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4)
_TEXT = st.text(max_size=40)
_NON_EMPTY_TEXT = st.text(min_size=1, max_size=40)
_DIRECTION = st.sampled_from(DIRECTIONS)


@st.composite
def _api_calls(draw: st.DrawFn) -> Action:
    name = draw(st.sampled_from(sorted(API_ACTIONS)))
    spec = API_ACTIONS[name]
    optional = [param for param in spec.params if param not in spec.required]
    chosen = [*spec.required, *draw(st.lists(st.sampled_from(optional), unique=True))]
    return Action(kind="api_call", name=name, arguments={param: draw(JSON_VALUES) for param in chosen})


def _swipes(p: st.SearchStrategy[Point]) -> st.SearchStrategy[Action]:
    def swipe(**fields: object) -> Action:
        return Action(kind="swipe", **fields)  # type: ignore[arg-type]

    return (
        st.builds(swipe, point=p, end_point=p)
        | st.builds(swipe, direction=_DIRECTION)
        | st.builds(swipe, point=p, direction=_DIRECTION)
        | st.builds(swipe, point=p, end_point=p, direction=_DIRECTION)
    )


def _actions_for(convention: Convention) -> st.SearchStrategy[Action]:
    p = points(convention)

    def kind(kind_name: str, /, **fields: st.SearchStrategy[object]) -> st.SearchStrategy[Action]:
        return st.builds(Action, kind=st.just(kind_name), **fields)  # type: ignore[arg-type]

    return st.one_of(
        *(kind(name, point=p) for name in POINTER_KINDS),
        kind("drag", point=p, end_point=p),
        _swipes(p),
        kind("scroll", point=st.none() | p, direction=_DIRECTION),
        kind("hotkey", keys=KEYS),
        kind("type", text=_NON_EMPTY_TEXT),
        kind("open_app", text=_NON_EMPTY_TEXT),
        *(kind(name) for name in ("wait", "press_home", "press_back")),
        *(kind(name, text=st.none() | _TEXT) for name in ("finished", "call_user")),
        *(kind(name, text=_TEXT) for name in ("answer", "ask_user")),
        kind("mcp_call", name=st.text(min_size=1, max_size=20), arguments=st.none() | JSON_OBJECTS),
        _api_calls(),
    )


_ACTIONS = {convention: _actions_for(convention) for convention in Convention}


def actions(convention: Convention = Convention.ABSOLUTE_RESIZED) -> st.SearchStrategy[Action]:
    """Any valid action (one that `check_action` accepts) with coordinates valid for `convention`."""
    return _ACTIONS[convention]


def thoughts() -> st.SearchStrategy[str]:
    return _THOUGHTS


def _formattable(thought: str) -> bool:
    try:
        format_response(thought, [Action(kind="wait")])
    except ValueError:
        return False
    return True


_THOUGHTS = (
    st.text(max_size=80).map(str.strip).filter(lambda t: not _ACTION_LINE.search(t) and _formattable(t))
)


# --- screen-pixel actions that OSWorld's action spaces can express ------------------------------------

OSWORLD_KEYS = tuple(sorted(k for k in KEYBOARD_KEYS if split_keys(k) == (k,)))


_SCREEN_POINTS = st.builds(Point, coordinate(4000), coordinate(4000))


def _osworld_actions() -> st.SearchStrategy[Action]:
    p = _SCREEN_POINTS

    def kind(kind_name: str, /, **fields: st.SearchStrategy[object]) -> st.SearchStrategy[Action]:
        return st.builds(Action, kind=st.just(kind_name), **fields)  # type: ignore[arg-type]

    return st.one_of(
        *(kind(name, point=p) for name in ("click", "left_double", "right_single", "hover")),
        kind("drag", point=p, end_point=p),
        kind("scroll", point=st.none() | p, direction=_DIRECTION),
        kind("type", text=_NON_EMPTY_TEXT),
        kind("hotkey", keys=st.lists(st.sampled_from(OSWORLD_KEYS), min_size=1, max_size=3).map(tuple)),
        *(kind(name) for name in ("wait", "finished", "call_user")),
    )


_OSWORLD_ACTIONS = _osworld_actions()


def osworld_actions() -> st.SearchStrategy[Action]:
    return _OSWORLD_ACTIONS


def osworld_sequences() -> st.SearchStrategy[list[Action]]:
    """Sequences whose low-level form is unambiguous: a hover right before a scroll without a point
    would read back as one scroll at the hovered point."""
    return _SEQUENCES


def _unambiguous(seq: list[Action]) -> bool:
    return not any(
        a.kind == "hover" and b.kind == "scroll" and b.point is None for a, b in itertools.pairwise(seq)
    )


_SEQUENCES = st.lists(_OSWORLD_ACTIONS, min_size=1, max_size=5).filter(_unambiguous)


# --- noisy text for the never-raises properties -------------------------------------------------------

_NOISE = st.text(alphabet="'\"()[]{},=\\\n <>|:_ActionThought0123456789.-", max_size=6) | st.text(max_size=4)
_RESPONSE_ACTIONS = st.lists(actions(), min_size=1, max_size=3)
_EDIT_COUNT = st.integers(min_value=0, max_value=4)
_EDIT_KIND = st.sampled_from(("insert", "delete", "duplicate", "replace"))


@st.composite
def noisy_responses(draw: st.DrawFn) -> str:
    """A valid response mangled by a few random insertions, deletions and duplications."""
    text = format_response(draw(_THOUGHTS), draw(_RESPONSE_ACTIONS))
    for _ in range(draw(_EDIT_COUNT)):
        i = draw(st.integers(min_value=0, max_value=len(text)))
        j = draw(st.integers(min_value=i, max_value=min(len(text), i + 8)))
        edit = draw(_EDIT_KIND)
        if edit == "insert":
            text = text[:i] + draw(_NOISE) + text[i:]
        elif edit == "delete":
            text = text[:i] + text[j:]
        elif edit == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i] + draw(_NOISE) + text[j:]
    return text


_ANY_TEXT = (
    st.text() | noisy_responses() | st.text(alphabet="'\"()[]{},=\\\n <>|:;`Actionclick_box", max_size=200)
)


def any_text() -> st.SearchStrategy[str]:
    return _ANY_TEXT
