"""Free-space accounting of one segment file, in 64 KiB pages: first-fit extents that coalesce on free."""

from __future__ import annotations

import bisect


class ExtentAllocator:
    """Free extents (start page, page count) kept sorted by start and merged with their neighbours."""

    def __init__(self, pages: int):
        self.pages = pages
        self._starts: list[int] = [0] if pages else []
        self._lengths: list[int] = [pages] if pages else []
        self.free_pages = pages

    def allocate(self, npages: int) -> int | None:
        """The first page of a run of npages free pages, or None if no run is long enough."""
        for i, length in enumerate(self._lengths):
            if length >= npages:
                start = self._starts[i]
                if length == npages:
                    del self._starts[i]
                    del self._lengths[i]
                else:
                    self._starts[i] = start + npages
                    self._lengths[i] = length - npages
                self.free_pages -= npages
                return start
        return None

    def reserve(self, start: int, npages: int) -> bool:
        """Mark a given run as used (recovery); False if any page of it is not free."""
        i = bisect.bisect_right(self._starts, start) - 1
        if i < 0:
            return False
        fstart, flen = self._starts[i], self._lengths[i]
        if start + npages > fstart + flen:
            return False
        before, after = start - fstart, fstart + flen - (start + npages)
        del self._starts[i]
        del self._lengths[i]
        if after:
            self._starts.insert(i, start + npages)
            self._lengths.insert(i, after)
        if before:
            self._starts.insert(i, fstart)
            self._lengths.insert(i, before)
        self.free_pages -= npages
        return True

    def free(self, start: int, npages: int) -> None:
        i = bisect.bisect_left(self._starts, start)
        if i < len(self._starts) and self._starts[i] < start + npages:
            raise ValueError(f"double free of pages {start}+{npages}")
        if i > 0 and self._starts[i - 1] + self._lengths[i - 1] > start:
            raise ValueError(f"double free of pages {start}+{npages}")
        merge_prev = i > 0 and self._starts[i - 1] + self._lengths[i - 1] == start
        merge_next = i < len(self._starts) and self._starts[i] == start + npages
        if merge_prev and merge_next:
            self._lengths[i - 1] += npages + self._lengths[i]
            del self._starts[i]
            del self._lengths[i]
        elif merge_prev:
            self._lengths[i - 1] += npages
        elif merge_next:
            self._starts[i] = start
            self._lengths[i] += npages
        else:
            self._starts.insert(i, start)
            self._lengths.insert(i, npages)
        self.free_pages += npages

    def largest_free(self) -> int:
        return max(self._lengths, default=0)

    def extents(self) -> list[tuple[int, int]]:
        return list(zip(self._starts, self._lengths))
