"""Hypothesis strategies shared by the property tests."""

from hypothesis import strategies as st

from replay.core.config import TREE_STATIC, TreeConfig


@st.composite
def tree_configs(draw, gammas=st.integers(1, 4), tree_types=st.just(TREE_STATIC)):
    """Random valid trees: up to 3 heads per step (never more than the level holds), widths 1..3."""
    gamma = draw(gammas)
    spec, heads, level = [], [], 1
    for i in range(gamma):
        h = 1 if i == 0 else draw(st.integers(1, min(level, 3)))
        widths = [draw(st.integers(1, 3)) for _ in range(h)]
        spec.append(widths)
        heads.append(h)
        level = sum(widths)
    return TreeConfig.from_lists(spec, heads, tree_type=draw(tree_types))
