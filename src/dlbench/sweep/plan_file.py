"""Reading a sweep plan: a packaged name or a YAML file, checked against the schema (types,
known axes and flags) and each point against RunConfig and the workload registry, with a
UserError naming the place before any point runs."""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import yaml

from dlbench.config.fields import MODES
from dlbench.config.flags import typed_value
from dlbench.config.limits import DEFAULT_POINT_TIMEOUT_S, MAX_REPEATS
from dlbench.errors import MAX_SECONDS, UserError, one_line, unknown_choice
from dlbench.results.schema import check_tag
from dlbench.results.store import writable_folder
from dlbench.serve.settings import SERVE_SETTINGS, SERVE_SWEEP_OWNED, ServeSettings
from dlbench.sweep.plan import AXES, ServePoint, SweepPlan, SweepPoint
from dlbench.workloads import get_workload


def packaged_plans() -> list[str]:
    """Names of the plans shipped inside the package."""
    folder = resources.files("dlbench.sweep") / "plans"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


PLAN_MAX_BYTES = 2**20  # a plan is a page of YAML; anything larger is the wrong file


def _check_plan_file(path: Path) -> None:
    """A UserError for a plan path that is no regular file (/dev/zero would be read until
    memory ends) or is too large to be a plan; a missing one is left to the read."""
    if not path.exists():
        return
    if not path.is_file():
        raise UserError(f"PLAN: {path} is not a regular file")
    if path.stat().st_size > PLAN_MAX_BYTES:
        raise UserError(
            f"PLAN: {path} is over {PLAN_MAX_BYTES // 2**20} MiB; a plan is a short YAML file"
        )


def load_plan(name_or_path: str) -> SweepPlan:
    """A packaged plan by name, or a YAML file by path; a UserError if neither or malformed."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        _check_plan_file(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"PLAN: cannot read {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise UserError(f"PLAN: {path} is not a UTF-8 text (YAML) file") from None
    elif name_or_path in packaged_plans():
        text = (resources.files("dlbench.sweep") / "plans" / f"{name_or_path}.yaml").read_text()
    else:
        raise unknown_choice("PLAN", name_or_path, [*packaged_plans(), "<file.yaml>"])
    return parse_plan(text, default_name=path.stem)


def parse_plan(text: str, default_name: str = "plan") -> SweepPlan:
    """The plan's YAML checked against the schema (types, known axes and flags), each point
    against RunConfig and the workload registry: a UserError naming the place, before any
    point runs."""
    try:
        data = yaml.load(text, Loader=_PlanLoader)  # a SafeLoader
    except yaml.YAMLError as exc:
        raise UserError(f"PLAN: not valid YAML: {one_line(str(exc))}") from None
    except RecursionError:
        raise UserError("PLAN: nested too deeply to be a plan") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise UserError(f"PLAN: must be a mapping of {', '.join(_TOP_LEVEL)}; got a {_kind(data)}")
    unknown = sorted(set(map(str, data)) - set(_TOP_LEVEL) - set(AXES))
    if unknown:
        raise UserError(f"PLAN: unknown key {unknown}; allowed: {', '.join(_TOP_LEVEL + AXES)}")
    serve = _serve_points(data.get("serve", []))
    runs = data.get("runs", [{k: data[k] for k in AXES if k in data}] if not serve else [])
    if not isinstance(runs, list) or not (runs or serve):
        raise UserError("PLAN: runs: must be a non-empty list of blocks (models: [...], ...)")
    plan = SweepPlan(
        name=str(data.get("name", default_name)),
        runs=[_check_block(block, f"PLAN: runs[{i}]") for i, block in enumerate(runs)],
        serve=serve,
        fixed=_check_fixed(data.get("fixed", {}), "PLAN: fixed"),
        timeout_s=_positive(
            data.get("timeout_s", DEFAULT_POINT_TIMEOUT_S), "PLAN: timeout_s", float, MAX_SECONDS
        ),
        repeats=_positive(data.get("repeats", 1), "PLAN: repeats", int, MAX_REPEATS),
    )
    plan.check_size()
    check_points(plan.points())
    return plan


class _PlanLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (it keeps the last
    and drops the first without a word, so half a plan would never run)."""

    def construct_mapping(self, node, deep=False):
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_TOP_LEVEL = ("name", "timeout_s", "repeats", "fixed", "runs", "serve")
_BLOCK_KEYS = (*AXES, "fixed", "tags")


def _serve_points(entries: object) -> list[ServePoint]:
    """The plan's `serve` runs: each a mapping of `dlbench serve` flags, checked as the command
    line checks them, with `tags` of its own."""
    if not isinstance(entries, list):
        raise UserError(
            f"PLAN: serve: must be a list of mappings of serve flags; got a {_kind(entries)}"
        )
    points = []
    for i, entry in enumerate(entries):
        where = f"PLAN: serve[{i}]"
        settings = settings_from_plan(entry, where)
        tags = entry.get("tags", {})
        if not isinstance(tags, dict):
            raise UserError(f"{where}.tags: must be a mapping of name: label; got a {_kind(tags)}")
        for key in tags:
            check_tag(str(key), f"{where}.tags")
        points.append(ServePoint(settings, {str(k): str(v) for k, v in tags.items()}))
    return points


def _kind(value: object) -> str:
    return {list: "list", dict: "mapping", str: "string"}.get(type(value), type(value).__name__)


def _positive(value: object, where: str, kind: type, most: float = math.inf) -> float | int:
    """A positive int (or finite number, for `kind` float), at most `most`."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or (kind is int and not isinstance(value, int)):
        raise UserError(f"{where}: invalid value {value!r}; a positive {kind.__name__}")
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{where}: invalid value {value!r}; a positive {kind.__name__}")
    if value > most:
        raise UserError(f"{where}: invalid value {value!r}; at most {most:,}")
    return kind(value)


def _check_fixed(fixed: object, where: str) -> dict[str, object]:
    """Flags every point of the plan (or block) gets, typed as RunConfig's fields."""
    if not isinstance(fixed, dict):
        raise UserError(f"{where}: must be a mapping of flag: value; got a {_kind(fixed)}")
    return {str(k): typed_value(str(k), v, where) for k, v in fixed.items()}


def _check_block(block: object, where: str) -> dict:
    """One run block: known keys, every axis a non-empty list of valid values."""
    if not isinstance(block, dict):
        raise UserError(f"{where}: must be a mapping of axes; got a {_kind(block)}")
    unknown = sorted(set(map(str, block)) - set(_BLOCK_KEYS))
    if unknown:
        raise UserError(f"{where}: unknown axis {unknown}; allowed: {', '.join(_BLOCK_KEYS)}")
    checked: dict = {}
    for axis in AXES:
        if axis not in block:
            continue
        values = block[axis]
        if not isinstance(values, list) or not values:
            raise UserError(
                f"{where}.{axis}: must be a non-empty list, e.g. {axis}: [{_EXAMPLES[axis]}]; "
                f"got {values!r}"
            )
        checked[axis] = [_AXIS_CHECKS[axis](v, f"{where}.{axis}") for v in values]
    if not checked.get("models"):
        raise UserError(f"{where}: every run block needs a non-empty `models` list")
    checked["fixed"] = _check_fixed(block.get("fixed", {}), f"{where}.fixed")
    tags = block.get("tags", {})
    if not isinstance(tags, dict):
        raise UserError(f"{where}.tags: must be a mapping of name: label; got a {_kind(tags)}")
    for key in tags:
        check_tag(str(key), f"{where}.tags")
    checked["tags"] = tags
    return checked


def _text(value: object, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise UserError(f"{where}: invalid value {value!r}; a name")
    return str(value)


def _mode(value: object, where: str) -> str:
    if value not in MODES:
        raise UserError(f"{where}: invalid value {value!r}; allowed: {', '.join(MODES)}")
    return str(value)


def _batch(value: object, where: str) -> int | str:
    return value if value == "auto" else _positive(value, where, int)


def _resolution(value: object, where: str) -> list[int]:
    if not isinstance(value, list) or len(value) != 2:
        raise UserError(f"{where}: invalid value {value!r}; [width, height], e.g. [224, 224]")
    return [_positive(side, where, int) for side in value]


def _devices(value: object, where: str) -> int | str:
    return value if value == "all" else _positive(value, where, int)


_AXIS_CHECKS = {
    "models": _text,
    "modes": _mode,
    "batch_sizes": _batch,
    "precisions": _text,
    "resolutions": _resolution,
    "devices": _devices,
    "power_limits": lambda v, where: _positive(v, where, float),
}
_EXAMPLES = {
    "models": "resnet50, vit",
    "modes": "train, infer",
    "batch_sizes": "32, 64",
    "precisions": "bf16-mixed",
    "resolutions": "[224, 224]",
    "devices": "1, 2",
    "power_limits": "300, 400",
}


def check_points(points: list[SweepPoint | ServePoint]) -> None:
    """Each point as the run would resolve it (RunConfig's checks, the workload and its input
    size), so that a plan whose points cannot run is refused whole, before the first starts."""
    folders: set[Path] = set()
    for point in points:
        if isinstance(point, ServePoint):
            continue  # checked as the plan was read
        try:
            config = point.config()
            work, cache = config.workload, config.acceleration.cache_dir
            get_workload(work.model).shape(work.width, work.height, work.seq_len)
            if cache is not None and cache not in folders:
                writable_folder(cache, "cache_dir")  # not at the point, later
                folders.add(cache)
        except UserError as exc:
            raise UserError(f"PLAN: point `{point.label}`: {exc}") from None


def settings_from_plan(entry: object, where: str) -> ServeSettings:
    """A plan's `serve` entry (a mapping of `dlbench serve` flags, underscores for dashes) as
    checked settings, each value in its declared type; a UserError naming `where` and the flag."""
    if not isinstance(entry, dict):
        raise UserError(f"{where}: must be a mapping of serve flags, e.g. {{model: resnet50}}")
    if "sweep_concurrency" in entry:
        raise UserError(
            f"{where}: sweep_concurrency: a point is one row (list the concurrencies as "
            "max_batch points, or run dlbench serve --sweep-concurrency)"
        )
    values = {
        str(k): typed_value(str(k), v, where, SERVE_SETTINGS, SERVE_SWEEP_OWNED)
        for k, v in entry.items()
        if k != "tags"
    }
    try:
        return ServeSettings(**values).checked()
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
