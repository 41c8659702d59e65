"""Small integer codes for the strings the index filters on, so filters are numpy comparisons."""

from __future__ import annotations

from collections.abc import Sequence


class Codes:
    """Interns strings (kinds, subtypes, session ids) as small integers for numpy filters."""

    def __init__(self) -> None:
        self._codes: dict[str | None, int] = {None: 0}
        self._names: list[str | None] = [None]

    def code(self, name: str | None) -> int:
        """The code of `name`, given it a new one if it has none yet."""
        found = self._codes.get(name)
        if found is None:
            found = self._codes[name] = len(self._names)
            self._names.append(name)
        return found

    def lookup(self, name: str | None) -> int | None:
        """The code of `name`, or None if it was never interned (so nothing carries it)."""
        return self._codes.get(name)

    @property
    def names(self) -> list[str | None]:
        """Every interned name, by code (code 0 is None)."""
        return list(self._names)

    @classmethod
    def of(cls, names: Sequence[str | None]) -> Codes:
        """The table that `names` was read from."""
        codes = cls()
        codes._names = list(names)
        codes._codes = {name: code for code, name in enumerate(codes._names)}
        return codes

    def name(self, code: int) -> str | None:
        """The string a code stands for."""
        return self._names[code]
