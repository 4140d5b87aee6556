"""Target presets: capability fields instead of name tests, figures with sources."""

from __future__ import annotations

import inspect
from dataclasses import replace

import tuner.targets as targets_module
from tuner.targets import SW26010, SW26010_PRO, Family, Sharing, Toolchain, get_target


def test_capabilities_are_fields():
    assert (SW26010.family, SW26010.toolchain, SW26010.sharing) == (Family.SW26010, Toolchain.SW5CC, Sharing.RLC)
    assert (SW26010_PRO.family, SW26010_PRO.toolchain, SW26010_PRO.sharing) == (
        Family.SW26010_PRO, Toolchain.SWGCC, Sharing.RMA)
    assert SW26010.mpe_clock_hz == 1.45e9 and SW26010_PRO.mpe_clock_hz == 2.1e9
    assert SW26010.vector_bits == 256 and SW26010_PRO.vector_bits == 512
    assert f"{SW26010.sharing}" == "rlc"  # prints as the plain name


def test_the_makefile_follows_the_toolchain_field_not_the_name():
    from tuner.aot.makefile import makefile

    renamed = replace(SW26010_PRO, name="new-sunway-cg")  # no "pro" in its name
    text = makefile(renamed, "/tmp")  # type: ignore[arg-type]
    assert "all: swgcc" in text and "-DSWTUNE_PRO" in text
    assert "all: sw5cc" in makefile("sw26010", "/tmp")


def test_every_slave_compile_with_type_based_alias_analysis_turns_it_off():
    """A fused CPE kernel's LDM intermediate lives in the kernels' LDM union; gcc's strict aliasing
    at -O2 and above miscompiled one (tuner/aot/makefile.py), so each slave rule at those levels says
    -fno-strict-aliasing."""
    from tuner.aot.makefile import makefile

    for target in ("sw26010", "sw26010-pro"):
        rules = [line for line in makefile(target, "/tmp").splitlines() if "-c slave.c" in line]
        assert len(rules) == 4  # sw5cc, swgcc, emu, emu-mpi
        for rule in rules:
            if any(f" -O{level} " in rule for level in (2, 3)):
                assert "-fno-strict-aliasing" in rule, rule


def test_every_figure_of_the_presets_has_a_source_tag():
    source = inspect.getsource(targets_module)
    body = source[source.index("SW26010 = Target("):source.index("TARGETS: dict")]
    for line in body.splitlines():
        line = line.strip()
        if "=" in line and not line.startswith(("#", ")", "name=", "description=", "extra=", "SW26010")) \
                and not line.startswith(("mesh_cols=", "simd_widths=")):
            assert any(tag in line for tag in ("[P]", "[S]", "[D]", "[A]")), line


def test_get_target_passes_targets_through():
    assert get_target(SW26010) is SW26010 and get_target("SW26010_PRO") is SW26010_PRO
