"""Breaking the rules on purpose: each rule of ``breaks.toml`` is broken in a scratch copy of
the tree and the tests that guard it are run; a break no test notices is a rule unguarded."""
