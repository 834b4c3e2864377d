import os
import re
import stat
import subprocess
from pathlib import Path

SRC = Path("/app/libtally")
PREFIX = Path("/opt/tally")
LIB = PREFIX / "lib"
PC = LIB / "pkgconfig" / "tally.pc"
DEMO_OUT = "libtally 1.2.0: n=6 sum=108 mean=18.00 above10=4\n"
PROBE = r"""#include <stdio.h>
#include <tally/tally.h>
int main(void) {
    int v[] = {5, 20, 30};
    printf("%s %ld %zu\n", tally_version(), tally_sum(v, 3), tally_count_above(v, 3, 10));
    return 0;
}
"""


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


def pc_fields():
    assert PC.is_file(), f"{PC} is missing"
    variables, fields = {}, {}
    for line in PC.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_.]*)\s*([=:])\s*(.*)$", line)
        assert m, f"bad line in tally.pc: {line!r}"
        (variables if m.group(2) == "=" else fields)[m.group(1)] = m.group(3).strip()
    return variables, fields


def expand(value, variables):
    for _ in range(10):
        value = re.sub(r"\$\{(\w+)\}", lambda m: variables[m.group(1)], value)
    return value


def test_header_installed():
    header = PREFIX / "include" / "tally" / "tally.h"
    assert header.is_file(), f"{header} is missing"
    assert header.read_bytes() == (SRC / "tally.h").read_bytes()
    assert mode(header) == 0o644, oct(mode(header))


def test_libraries_and_symlinks():
    static, shared = LIB / "libtally.a", LIB / "libtally.so.1.2.0"
    assert static.is_file() and not static.is_symlink(), f"{static} is missing"
    assert static.read_bytes().startswith(b"!<arch>\n")
    assert mode(static) == 0o644, oct(mode(static))
    assert shared.is_file() and not shared.is_symlink(), f"{shared} is missing"
    assert mode(shared) == 0o755, oct(mode(shared))
    assert "Library soname: [libtally.so.1]" in run(["readelf", "-d", str(shared)]).stdout
    assert (LIB / "libtally.so.1").is_symlink() and os.readlink(LIB / "libtally.so.1") == "libtally.so.1.2.0"
    assert (LIB / "libtally.so").is_symlink() and os.readlink(LIB / "libtally.so") == "libtally.so.1"


def test_pkgconfig_file():
    variables, fields = pc_fields()
    assert variables.get("prefix") == "/opt/tally"
    assert variables.get("libdir") == "${prefix}/lib"
    assert variables.get("includedir") == "${prefix}/include"
    assert fields.get("Name") == "tally"
    assert fields.get("Description")
    assert fields.get("Version") == "1.2.0"
    assert fields.get("Cflags") == "-I${includedir}"
    assert fields.get("Libs") == "-L${libdir} -ltally"


def test_build_with_pkgconfig_flags(tmp_path):
    variables, fields = pc_fields()
    cflags, libs = expand(fields["Cflags"], variables).split(), expand(fields["Libs"], variables).split()
    (tmp_path / "probe.c").write_text(PROBE)
    exe = tmp_path / "probe"
    out = run(["cc", str(tmp_path / "probe.c"), *cflags, *libs, "-o", str(exe)])
    assert out.returncode == 0, out.stderr
    out = run([str(exe)], env={"LD_LIBRARY_PATH": str(LIB), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout == "1.2.0 55 2\n"


def test_demo_program():
    demo = PREFIX / "bin" / "tally-demo"
    assert demo.is_file() and os.access(demo, os.X_OK), f"{demo} is missing or not executable"
    dyn = run(["readelf", "-d", str(demo)]).stdout
    assert "Shared library: [libtally.so.1]" in dyn, "tally-demo is not linked against libtally.so.1"
    assert "/opt/tally/lib" in dyn, "tally-demo has no run path to /opt/tally/lib"
    out = run([str(demo), "4", "8", "15", "16", "23", "42"], env={"PATH": "/usr/bin:/bin"}, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout == DEMO_OUT


def test_source_tree_clean():
    left = sorted(p.name for p in SRC.rglob("*")
                  if p.suffix in (".o", ".a") or ".so" in p.name)
    assert not left, f"build artifacts left in {SRC}: {left}"
    assert (SRC / "tally.c").is_file() and (SRC / "Makefile").is_file()
