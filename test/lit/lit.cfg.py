# -*- Python -*-
"""lit configuration for the autosp FileCheck suite.

Run from the repository root:  lit -v test/lit
Each test is a .mlir file whose `// RUN:` lines pipe `autosp-opt` into FileCheck.

`%autosp-opt` runs the autosp-opt of THIS source tree (tools/from_source.py maps the packages to
it), so the suite tests the working tree even when the interpreter's editable install points at
another checkout. Set AUTOSP_OPT to test another command instead, e.g. AUTOSP_OPT=autosp-opt to
test the installed console script.
"""
import os
import shlex
import shutil
import sys

import lit.formats

config.name = "autosp"
config.suffixes = [".mlir"]
# lit's internal shell provides `not`, pipes and redirections on every platform
config.test_format = lit.formats.ShTest(execute_external=False)
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
config.test_exec_root = os.path.join(config.test_source_root, "Output")
config.excludes = ["tools", "Output", "Inputs"]


def _console_script(name: str) -> str | None:
    """A console script next to this interpreter (the environment lit runs in), else on PATH."""
    for candidate in (os.path.join(os.path.dirname(sys.executable), name), shutil.which(name)):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


if os.environ.get("AUTOSP_OPT"):
    autosp_opt = os.environ["AUTOSP_OPT"]
    if os.sep not in autosp_opt and " " not in autosp_opt:
        autosp_opt = _console_script(autosp_opt) or autosp_opt
else:
    autosp_opt = " ".join(shlex.quote(a) for a in (
        sys.executable, os.path.join(config.test_source_root, "tools", "from_source.py"), "autosp-opt"))

# FileCheck: the `filecheck` PyPI package (pure Python), installed with the test extras.
filecheck = _console_script("filecheck")
if filecheck is None:
    try:
        import filecheck as _fc  # noqa: F401
        filecheck = f"{shlex.quote(sys.executable)} -m filecheck"
    except ImportError:
        lit_config.fatal("FileCheck not found: pip install filecheck (or pip install -e '.[test]')")

# `%FileCheck` before `FileCheck`, so the first spelling is not half-replaced by the second.
config.substitutions.append(("%FileCheck", filecheck))
config.substitutions.append(("%autosp-opt", autosp_opt))
config.substitutions.append((r"\bFileCheck\b", filecheck))

# No GPU probing and single-threaded start-up: every RUN line starts a fresh Python.
config.environment["CUDA_VISIBLE_DEVICES"] = ""
config.environment["OMP_NUM_THREADS"] = "1"
for var in ("HOME", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
