"""Which page of a list a caller asks for: what services take, whatever interface asked."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageRequest:
    page: int
    size: int

    @property
    def offset(self) -> int:
        return self.page * self.size
