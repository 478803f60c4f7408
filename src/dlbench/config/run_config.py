"""RunConfig, the one validated configuration of a run, and its flags (`SETTINGS`): each field
of its sections (config.sections) is one flag, and a flag's key names it in plan files, rows and
`RunConfig.of`."""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass, field

from dlbench.config.fp8_recipes import resolve_recipe
from dlbench.config.limits import COUNTER_LEAD_S, DEFAULT_MIN_TIME_S, POWER_AVERAGING_S
from dlbench.config.sections import (
    AccelerationConfig,
    CostConfig,
    DataConfig,
    DeviceConfig,
    MeasurementConfig,
    OutputConfig,
    TelemetryConfig,
    WorkloadConfig,
)


@dataclass(frozen=True)
class RunConfig:
    """Everything that moves the number, by section; every setting lands in the result row."""

    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    acceleration: AccelerationConfig = field(default_factory=AccelerationConfig)
    measurement: MeasurementConfig = field(default_factory=MeasurementConfig)
    devices: DeviceConfig = field(default_factory=DeviceConfig)
    data: DataConfig = field(default_factory=DataConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    cost: CostConfig = field(default_factory=CostConfig)

    def __post_init__(self) -> None:
        """What crosses sections, checked where every config is made (the command line, a
        plan's points, a server's settings): an FP8 recipe of the run's own mode."""
        if self.acceleration.fp8_recipe is not None:
            resolve_recipe(self.acceleration.fp8_recipe, self.workload.mode)

    @classmethod
    def of(cls, **settings: object) -> RunConfig:
        """A config from settings by key (`batch_size=8`, `devices="2"`: a flag's name, a plan
        file's and a column's), each checked by its section; the others at their defaults."""
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise TypeError(f"RunConfig has no setting {', '.join(unknown)}")
        by_section: dict[str, dict[str, object]] = {name: {} for name in SECTION_CLASSES}
        for key, value in settings.items():
            setting = SETTINGS[key]
            by_section[setting.section][setting.name] = value
        return cls(**{name: SECTION_CLASSES[name](**values) for name, values in by_section.items()})

    def settings(self) -> dict[str, object]:
        """Every setting by key, in the sections' order (what `of` takes back)."""
        return {key: self.setting(key) for key in SETTINGS}

    def setting(self, key: str) -> object:
        """One setting by key: `setting("data_workers")` is `data.workers`."""
        where = SETTINGS[key]
        return getattr(getattr(self, where.section), where.name)

    def replace(self, **changes: object) -> RunConfig:
        """A copy with some settings (by key) changed, checked again."""
        return RunConfig.of(**{**self.settings(), **changes})

    def min_time_s(self, device_type: str) -> float:
        """The window's minimum length: as given, else DEFAULT_MIN_TIME_S where GPU telemetry
        reads energy, else none."""
        if self.measurement.min_time is not None:
            return self.measurement.min_time
        return DEFAULT_MIN_TIME_S if self.telemetry.enabled and device_type == "cuda" else 0.0

    def min_warmup_s(self, device_type: str, energy_counter: bool = False) -> float:
        """Busy time before the window where GPU telemetry reads energy: COUNTER_LEAD_S from
        an energy counter, POWER_AVERAGING_S from sampled power."""
        if not (self.telemetry.enabled and device_type == "cuda"):
            return 0.0
        return COUNTER_LEAD_S if energy_counter else POWER_AVERAGING_S


@dataclass(frozen=True)
class Setting:
    """One flag of a run: its key, the section and field that hold it, how it is declared."""

    key: str
    section: str
    name: str
    field: dataclasses.Field
    kind: object  # the field's type, resolved
    panel: str  # its group in `--help`: the title of the dataclass that declares it

    @property
    def help(self) -> str:
        """The flag's help, written once in the section."""
        return self.field.metadata["help"]

    @property
    def flags(self) -> tuple[str, ...]:
        """Its names when they are not `--key-name` (`--workers`, `--data-workers`)."""
        return self.field.metadata.get("flags", ())

    @property
    def switch(self) -> bool:
        """An on-only flag (`--json`) rather than a `--name/--no-name` pair."""
        return bool(self.field.metadata.get("switch"))

    @property
    def default(self) -> object:
        """The value when the flag is not given."""
        f = self.field
        return f.default_factory() if f.default is dataclasses.MISSING else f.default


# RunConfig's sections, by field name, in the order they are declared.
SECTION_CLASSES: dict[str, type] = {
    f.name: typing.get_type_hints(RunConfig)[f.name] for f in dataclasses.fields(RunConfig)
}


def declared_settings(cls: type, section: str) -> dict[str, Setting]:
    """The flags a dataclass of `option` fields declares (a RunConfig section, a serve run's
    settings), by key; its TITLE is their group in `--help`."""
    kinds = typing.get_type_hints(cls)
    return {
        (f.metadata.get("key") or f.name): Setting(
            f.metadata.get("key") or f.name, section, f.name, f, kinds[f.name], cls.TITLE
        )
        for f in dataclasses.fields(cls)
    }


_SAME = object()
# a help's note of RunConfig's own default, left out where another command's default differs
_DEFAULT_NOTE = re.compile(r"\s*\([^()]*default[^()]*\)")


def shared(key: str, default: object = _SAME, note: str = "", only: str = "") -> dataclasses.Field:
    """A field of another command's settings (a serve run's) that is this run flag: its help and
    names are RunConfig's, declared once there; `default` where that command runs otherwise (a
    server compiles by default: RunConfig's note of its own default is left out of the help),
    a `note` on what else the setting decides there, and the kind of model it is `only` for."""
    setting = SETTINGS[key]
    own = default is _SAME
    help = setting.help if own else _DEFAULT_NOTE.sub("", setting.help)
    metadata = {**setting.field.metadata, "help": f"{help} {note}".strip(), "shared": key}
    metadata["only"] = only  # what it is for there (`llm`: an LLM's own flag)
    value = setting.default if own else default
    if isinstance(value, (tuple, list, dict)) or dataclasses.is_dataclass(value):
        return dataclasses.field(default_factory=lambda: value, metadata=metadata)
    return dataclasses.field(default=value, metadata=metadata)


def _settings() -> dict[str, Setting]:
    found: dict[str, Setting] = {}
    for section, cls in SECTION_CLASSES.items():
        declared = declared_settings(cls, section)
        assert not set(declared) & set(found), set(declared) & set(found)  # a key, one setting
        found.update(declared)
    return found


# Every run flag by key, in the sections' order; the groups of `--help` are the sections'.
SETTINGS: dict[str, Setting] = _settings()
PANELS = tuple(cls.TITLE for cls in SECTION_CLASSES.values())
