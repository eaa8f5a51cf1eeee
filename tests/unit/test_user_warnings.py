"""`user_warnings.warnings_at_user_line`: a warning pointing into this package is shown at the user's line, any
other where it was raised, and an outer recorder (pytest.warns) sees both."""

import os
import warnings

import pytest

import codapo_trl
from codapo_trl.user_warnings import warnings_at_user_line


def _warn_from(filename: str, text: str) -> None:
    code = compile(f"import warnings\nwarnings.warn({text!r}, UserWarning)\n", filename, "exec")
    exec(code, {"__name__": "somewhere"})


def test_a_warning_pointing_into_the_package_moves_to_the_users_line_and_others_stay():
    ours = os.path.join(os.path.dirname(codapo_trl.__file__), "dynamics", "mixin.py")
    elsewhere = os.path.join(os.path.dirname(pytest.__file__), "somewhere.py")
    with pytest.warns(UserWarning) as record, warnings_at_user_line():
        _warn_from(ours, "through our hook")
        _warn_from(elsewhere, "inside a library")
    where = {str(w.message): (w.filename, w.lineno) for w in record}
    assert where["through our hook"][0] == __file__  # the `with` line's frame: this test
    assert where["inside a library"] == (elsewhere, 2)


def test_warnings_are_issued_even_when_the_block_raises():
    ours = os.path.join(os.path.dirname(codapo_trl.__file__), "trainer.py")
    with pytest.warns(UserWarning, match="before the error"), pytest.raises(ValueError), warnings_at_user_line():
        _warn_from(ours, "before the error")
        raise ValueError("construction failed")


def test_an_ignore_filter_still_applies():
    ours = os.path.join(os.path.dirname(codapo_trl.__file__), "trainer.py")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("ignore")
        with warnings_at_user_line():
            _warn_from(ours, "silenced")
    assert record == []
