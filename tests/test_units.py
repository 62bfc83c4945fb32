"""units.py: the one size parser and the one formatter every report uses, and the unit a budget is shown in."""

from __future__ import annotations

import pytest

from gpulint import units
from gpulint.units import Size, display_unit, format_bytes, format_time, parse_size, written_unit


@pytest.mark.parametrize("text,size", [
    ("24G", Size(24 * 10**9, "GB")), ("24g", Size(24 * 10**9, "GB")), ("24 GB", Size(24 * 10**9, "GB")),
    ("24gb", Size(24 * 10**9, "GB")), ("24GiB", Size(24 * 2**30, "GiB")), ("24 gi", Size(24 * 2**30, "GiB")),
    ("512MiB", Size(512 * 2**20, "MiB")), ("300k", Size(300_000, "kB")), ("1.5e9", Size(1_500_000_000, "B")),
    (4096, Size(4096, "B")),
])
def test_sizes_as_people_write_them(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["24XB", "lots", "", "-5GB", "0GB", None, True, [24]])
def test_unreadable_sizes_say_how_to_write_one(text):
    with pytest.raises(ValueError, match="24GB|positive"):
        parse_size(text)


def test_one_formatter_for_bytes_and_times():
    assert format_bytes(289.19 * 2**20) == "289.19 MiB"
    assert format_bytes(303_000_000, "MB") == "303.00 MB"
    assert format_bytes(209_715_200, "MiB") == "200.00 MiB"  # a 200MiB budget stays 200 MiB, never "210 MB"
    assert format_bytes(3_100_000, "GB") == "0.00310 GB"  # three significant digits below one
    assert format_bytes(8 * 2**20, like="GB") == "8.39 MB"  # sizes in the budget's family (decimal here)
    assert format_bytes(12) == "12 B" and format_bytes(None) == units.NONE
    assert format_bytes(24 * 10**12, "GB") == "24,000.00 GB"
    assert format_time(0.00177) == "1.77 ms" and format_time(4.5e-5) == "0.0450 ms"
    assert format_time(2.45) == "2,450.00 ms" and format_time(12.5) == "12.50 s" and format_time(0) == "0 ms"
    assert format_time(4.5e-6) == "4.50 µs" and format_time(1e-5) == "0.0100 ms"


def test_a_budget_is_shown_in_the_unit_it_was_written_in():
    assert display_unit("GB", 24e9, 31.6e9) == "GB"
    assert display_unit("MiB", 200 * 2**20, 289 * 2**20) == "MiB"
    # Plans that did not record the unit: the unit the budget reads best in.
    assert display_unit(None, 24e9, 31.6e9) == "GB" and display_unit(None, 200 * 2**20) == "MiB"
    assert display_unit(None, None, 31.6e9) == "GiB"  # no budget: binary, sized for the largest value
    assert display_unit("B", 2_000_000_000) == "GB"  # a plain byte count: the unit it reads best in
    assert written_unit(1.5e9) == "GB" and written_unit(24 * 2**30) == "GiB" and written_unit(123_456_789) == "MiB"
