"""The tests of TRL's GRPO suite whose outcome differs with CoDaPO on (its defaults), each with the reason.

A difference listed here is a consequence of the method, documented in `docs/dropin.md`, and asserted the CoDaPO way
by a test of ours (named in the reason). Keys are test ids as `Class::test` (all parametrisations) or
`Class::test[param]`.
"""

ON_DIFFERENCES: dict[str, str] = {}
