"""Who holds a lease, named for the fleet page. A lessee writes its owner string (`rl:<run>[:…]`,
`annotation:<session>`, `flywheel-job-<job>`); the app it belongs to tells the fleet how to read and
name it with `owner_kind_register` in its AppConfig.ready(): those apps sit above the fleet (imports
run one way), so the fleet never imports them."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# ids of one kind -> {id: (label, url or None)}; an id missing from the answer is gone.
OwnerNames = Callable[[set[int]], dict[int, tuple[str, str | None]]]


@dataclass(frozen=True)
class OwnerKind:
    kind: str  # rl | annotation | flywheel
    pattern: re.Pattern[str]  # group 1: the owner's id
    names: OwnerNames


OWNER_KINDS: dict[str, OwnerKind] = {}


def owner_kind_register(*, kind: str, pattern: str, names: OwnerNames) -> None:
    """Lease owners matching `pattern` (its group 1 an id) are `kind`s, named by `names`."""
    OWNER_KINDS[kind] = OwnerKind(kind, re.compile(pattern), names)
