"""Configuration: durations, the key parsers, and layering defaults < file < --set < shortcuts."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from upsertmat.commands.options import add_config_arguments, config_layers, settings_from_args
from upsertmat.defaults import default_layer
from upsertmat.impls import (
    Backend,
    ConfigError,
    Settings,
    Strategy,
    TimeDomain,
    UpdateType,
    build_settings,
    create_named,
)
from upsertmat.impls.config import (
    BACKEND,
    KNOWN_KEYS,
    STRATEGY,
    THRESHOLD_HIGH,
    THRESHOLD_LOW,
    TIME_DOMAIN,
    TTL,
    UPDATE_TYPE,
    flatten,
    load_config_file,
    parse_duration_ms,
    parse_set_option,
)
from upsertmat.impls.settings import TtlSettings
from upsertmat.spec import Keys


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        (1000, 1000),
        ("1000", 1000),
        ("1000 ms", 1000),
        ("1000ms", 1000),
        ("10 s", 10_000),
        ("10 seconds", 10_000),
        ("2 min", 120_000),
        ("1 h", 3_600_000),
        ("1 H", 3_600_000),
        ("3 d", 259_200_000),
        (0, 0),
        ("0", 0),
    ],
)
def test_durations(text: str | int, millis: int) -> None:
    assert parse_duration_ms(text) == millis


@pytest.mark.parametrize("text", ["", "ten s", "1.5 s", "-1", -1, "1 fortnight", "s", True, "1 s 2"])
def test_malformed_durations(text: str | int) -> None:
    with pytest.raises(ValueError):
        parse_duration_ms(text)


def parser() -> argparse.ArgumentParser:
    result = argparse.ArgumentParser()
    add_config_arguments(result)
    return result


def settings_of(*argv: str) -> Settings:
    return settings_from_args(parser().parse_args(list(argv)))


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_defaults_are_known_keys_and_equal_the_settings_defaults() -> None:
    defaults = default_layer()
    assert set(defaults) <= set(KNOWN_KEYS)
    assert build_settings([("defaults", defaults)]) == Settings()
    assert settings_of() == Settings()


def test_a_config_file_overrides_the_defaults_flat_or_nested(tmp_path: Path) -> None:
    flat = write(tmp_path / "flat.yaml", f"{STRATEGY}: map\n{BACKEND}: lmdb\n{TTL}: 10 s\n")
    assert settings_of("--config", str(flat)) == Settings(
        strategy=Strategy.MAP, backend=Backend.LMDB, ttl=TtlSettings(ttl_ms=10_000)
    )
    nested = write(
        tmp_path / "nested.yaml",
        "table:\n  exec:\n    sink:\n      upsert-materialize-strategy:\n        type: SORTED\n"
        "    state.ttl: 1 h\nupsertmat.state.ttl:\n  time-domain: event_time\n  update-type: on_create\n",
    )
    settings = settings_of("--config", str(nested))
    assert settings.strategy is Strategy.SORTED
    assert settings.ttl == TtlSettings(3_600_000, TimeDomain.EVENT_TIME, UpdateType.ON_CREATE)
    assert settings.backend is Backend.HEAP  # from the defaults


def test_layering_order_defaults_then_file_then_set_then_shortcuts(tmp_path: Path) -> None:
    config = write(tmp_path / "job.yaml", f"{STRATEGY}: VALUE\n{BACKEND}: rocksdb\n{TTL}: 5 s\n")
    assert settings_of("--config", str(config)).strategy is Strategy.VALUE
    after_set = settings_of("--config", str(config), "--set", f"{STRATEGY}=MAP", "--set", f"{TTL}=1000 ms")
    assert (after_set.strategy, after_set.backend, after_set.ttl.ttl_ms) == (
        Strategy.MAP,
        Backend.ROCKSDB,
        1000,
    )
    # the later --set wins over an earlier one
    assert settings_of("--set", f"{STRATEGY}=MAP", "--set", f"{STRATEGY}=sorted").strategy is Strategy.SORTED
    shortcuts = settings_of(
        "--config",
        str(config),
        "--set",
        f"{STRATEGY}=MAP",
        "--strategy",
        "adaptive",
        "--backend",
        "heap",
        "--ttl",
        "0",
    )
    assert (shortcuts.strategy, shortcuts.backend, shortcuts.ttl.ttl_ms) == (
        Strategy.ADAPTIVE,
        Backend.HEAP,
        0,
    )


def test_layers_name_their_sources(tmp_path: Path) -> None:
    config = write(tmp_path / "job.yaml", f"{TTL}: 5 s\n")
    args = parser().parse_args(["--config", str(config), "--set", f"{TTL}=1 s", "--ttl", "2 s"])
    sources = [source for source, _ in config_layers(args)]
    assert sources[1:] == [f"--config {config}", f"--set {TTL}=1 s", "--ttl 2 s"]
    assert sources[0].startswith("built-in defaults")


def test_strategy_and_backend_names_are_case_insensitive() -> None:
    assert settings_of("--strategy", "legacy", "--backend", "HEAP") == Settings()
    assert settings_of("--strategy", "Map").strategy is Strategy.MAP


def test_unknown_key_is_an_error_naming_it_and_its_source(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"unknown configuration key 'table\.exec\.state\.tll' \(from --set"
    ):
        settings_of("--set", "table.exec.state.tll=1 s")
    config = write(tmp_path / "job.yaml", "parallelism:\n  default: 4\n")
    with pytest.raises(ConfigError, match=rf"'parallelism\.default' \(from --config {config}\)"):
        settings_of("--config", str(config))


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (STRATEGY, "LINKED", "expected one of LEGACY, VALUE, MAP, SORTED, ADAPTIVE"),
        (BACKEND, "redis", "expected one of heap, rocksdb, lmdb, spark"),
        (TTL, "ten seconds", "not a duration"),
        (TIME_DOMAIN, "wall_clock", "expected one of processing_time, event_time"),
        (UPDATE_TYPE, "never", "expected one of on_create_and_write, on_create, on_read_and_write"),
        (THRESHOLD_HIGH, "0", "expected a positive integer"),
        (THRESHOLD_LOW, "4.5", "expected a positive integer"),
    ],
)
def test_malformed_values_are_errors_naming_key_value_and_source(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_of("--set", f"{key}={value}")
    text = str(caught.value)
    assert text.startswith(f"bad value {value!r} for {key} (from --set {key}={value})")
    assert message in text


def test_malformed_shortcut_names_the_shortcut() -> None:
    with pytest.raises(
        ConfigError, match=r"bad value 'soon' for table\.exec\.state\.ttl \(from --ttl soon\)"
    ):
        settings_of("--ttl", "soon")


def test_thresholds_high_must_exceed_low() -> None:
    ok = settings_of("--set", f"{THRESHOLD_HIGH}=10", "--set", f"{THRESHOLD_LOW}=9")
    assert (ok.threshold_high, ok.threshold_low) == (10, 9)
    for high, low in ((10, 10), (5, 9)):
        with pytest.raises(
            ConfigError, match=rf"threshold\.high \({high}\) must be greater than .*\({low}\)"
        ):
            settings_of("--set", f"{THRESHOLD_HIGH}={high}", "--set", f"{THRESHOLD_LOW}={low}")


def test_bad_config_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config_file(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_config_file(write(tmp_path / "bad.yaml", "a: [1\n"))
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config_file(write(tmp_path / "list.yaml", "- a\n- b\n"))
    assert load_config_file(write(tmp_path / "empty.yaml", "# nothing\n")) == {}


def test_set_option_syntax() -> None:
    assert parse_set_option(" a.b = 1 s ") == ("a.b", "1 s")
    assert parse_set_option("a=b=c") == ("a", "b=c")
    for text in ("novalue", "=1"):
        with pytest.raises(ConfigError, match="--set expects KEY=VALUE"):
            parse_set_option(text)


def test_flatten_joins_nested_keys() -> None:
    assert flatten({"a": {"b": {"c": 1}, "d": 2}, "e.f": {"g": 3}}) == {"a.b.c": 1, "a.d": 2, "e.f.g": 3}


def test_legacy_heap_takes_ttl() -> None:
    materializer = create_named("LEGACY/heap", Keys(pk=(0,)), settings_of("--ttl", "1 h"))
    assert materializer.retract_misses == 0


def test_a_negative_ttl_is_refused_on_the_command_line_and_in_the_library() -> None:
    with pytest.raises(ConfigError, match=r"bad value '-5'"):
        build_settings([("--set", {"table.exec.state.ttl": "-5"})])
    with pytest.raises(ValueError, match=r"table\.exec\.state\.ttl must be >= 0"):
        TtlSettings(ttl_ms=-1)


def test_lmdb_durability_key_selects_the_mode() -> None:
    from upsertmat.impls import LmdbDurability

    assert build_settings([]).lmdb_durability is LmdbDurability.FAST
    settings = build_settings([("--set", {"upsertmat.state.lmdb.durability": "SAFE"})])
    assert settings.lmdb_durability is LmdbDurability.SAFE
    with pytest.raises(ConfigError, match=r"upsertmat.state.lmdb.durability.*fast, safe, full"):
        build_settings([("--set", {"upsertmat.state.lmdb.durability": "eventually"})])
