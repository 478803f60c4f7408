"""`--fp8-recipe`: every FP8 recipe as one frozen record, stated once; the flag's choices and
help, the row's `fp8_recipe` column, which layers a run converts and the share of a layer's
GEMMs in FP8 are all read from it. A run resolves its recipe once, in its plan (the mode's
default where none is named), and hands the record down."""

from __future__ import annotations

from dataclasses import dataclass

from dlbench.errors import invalid


@dataclass(frozen=True)
class Fp8Recipe:
    """One recipe: its name (the flag's value and the row's), the mode it serves, torchao's
    recipe it runs, whether the output head runs in float8 too, and how many of a Linear
    layer's GEMMs per sample run in FP8 (training's three: forward, the input's gradient and
    the weight's; inference's one)."""

    name: str
    mode: str  # train or infer
    torchao: str  # training: Float8LinearConfig's recipe; inference: per-row dynamic scaling
    with_head: bool
    fp8_gemms: int
    default: bool = False  # the mode's recipe where none is named
    summary: str = ""

    @property
    def float8_all_gather(self) -> bool:
        """Whether FSDP can all-gather its weights in float8 (tensorwise scaling: one scale a
        weight, computed for all of them once a step)."""
        return self.torchao == "tensorwise"


FP8_RECIPES = (
    Fp8Recipe(
        "tensorwise",
        "train",
        "tensorwise",
        with_head=False,
        fp8_gemms=3,
        default=True,
        summary="one scale a tensor",
    ),
    Fp8Recipe("rowwise", "train", "rowwise", with_head=False, fp8_gemms=3, summary="a scale a row"),
    Fp8Recipe(
        "rowwise_with_gw_hp",
        "train",
        "rowwise_with_gw_hp",
        with_head=False,
        fp8_gemms=2,
        summary="a scale a row, the weight's gradient in bf16",
    ),
    Fp8Recipe(
        "tensorwise_with_head",
        "train",
        "tensorwise",
        with_head=True,
        fp8_gemms=3,
        summary="tensorwise, the output head too (torchtitan keeps it out by default)",
    ),
    Fp8Recipe(
        "rowwise_dynamic",
        "infer",
        "rowwise_dynamic",
        with_head=False,
        fp8_gemms=1,
        default=True,
        summary="float8 weights with a scale a row, activations quantized a row as they arrive",
    ),
    Fp8Recipe(
        "rowwise_dynamic_with_head",
        "infer",
        "rowwise_dynamic",
        with_head=True,
        fp8_gemms=1,
        summary="rowwise_dynamic, the output head too (a server keeps it in bf16 by default)",
    ),
)
_BY_NAME = {recipe.name: recipe for recipe in FP8_RECIPES}


def recipe_names(mode: str | None = None) -> tuple[str, ...]:
    """The recipes' names as declared (one mode's: its default first)."""
    if mode is None:
        return tuple(r.name for r in FP8_RECIPES)
    chosen = [r for r in FP8_RECIPES if r.mode == mode]
    return tuple(r.name for r in sorted(chosen, key=lambda r: not r.default))


def default_recipe(mode: str) -> Fp8Recipe:
    """The mode's recipe where none is named."""
    return next(r for r in FP8_RECIPES if r.mode == mode and r.default)


def recipe_named(name: str) -> Fp8Recipe:
    """The recipe of this name; a UserError naming --fp8-recipe for any other."""
    if name not in _BY_NAME:
        raise invalid("--fp8-recipe", name, f"allowed: {', '.join(recipe_names())}")
    return _BY_NAME[name]


def resolve_recipe(name: str | None, mode: str) -> Fp8Recipe:
    """The recipe a run of `mode` runs: the one named, or the mode's default; a recipe of the
    other mode is refused naming the flag and the mode's own."""
    if name is None:
        return default_recipe(mode)
    recipe = recipe_named(name)
    if recipe.mode != mode:
        raise invalid("--fp8-recipe", name, f"{mode}: {', '.join(recipe_names(mode))}")
    return recipe


def recipe_help(mode: str | None = None) -> str:
    """The flag's help: one mode's default, or each mode's (a command of both); a wrong name
    is refused naming the mode's recipes."""
    if mode is not None:
        return f"fp8's recipe (default: {default_recipe(mode).name})."
    defaults = ", ".join(f"{default_recipe(m).name} in {m}" for m in ("train", "infer"))
    return f"fp8's recipe (default: {defaults})."


def recipes_help() -> str:
    """Each recipe and what it does, for the flag's help and the row's column."""
    return "; ".join(f"{r.name} ({r.mode}: {r.summary})" for r in FP8_RECIPES)
