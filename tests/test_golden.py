"""Every golden file under tests/golden: operations (facts in, commands out) and fact parsers."""

import pytest

from tests.golden import check_fact_case, check_op_case, golden_files


@pytest.mark.parametrize("path", golden_files("ops"), ids=lambda p: p.stem)
def test_operation_golden(path):
    check_op_case(path)


@pytest.mark.parametrize("path", golden_files("facts"), ids=lambda p: p.stem)
def test_fact_golden(path):
    check_fact_case(path)
