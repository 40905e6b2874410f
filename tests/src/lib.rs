//! Holds no code: the tests in `tests/` exercise the workspace from outside.
