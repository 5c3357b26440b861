"""The seed contract, asserted on a live engine: choice i of (seed s, n) is the request (seed s + i, n = 1)."""


def assert_choices_replay_alone(engine, prompt, n: int, seed: int, **args) -> None:
    """Generate n choices at once, then each alone from its seed: the same tokens, and n distinct texts."""
    wide = engine.generate(prompt, n=n, seed=seed, **args)
    alone = [engine.generate(prompt, n=1, seed=seed + i, **args).choices[0] for i in range(n)]
    assert [c.token_ids for c in wide.choices] == [c.token_ids for c in alone]
    assert len({c.text for c in wide.choices}) == n
