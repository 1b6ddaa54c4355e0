# -*- Python -*-
"""lit configuration for the autosp FileCheck suite.

Run from the repository root:  lit -v test/lit
Each test is a .mlir file whose `// RUN:` lines pipe `autosp-opt` into FileCheck.
"""
import os
import shutil
import sys

import lit.formats

config.name = "autosp"
config.suffixes = [".mlir"]
config.excludes = ["lit.cfg.py"]
# lit's internal shell provides `not`, pipes and redirections on every platform
config.test_format = lit.formats.ShTest(execute_external=False)
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.test_source_root, "Output")


def _tool(name: str, module: str | None = None) -> str:
    """The console script next to this interpreter (the environment autosp is installed in), then
    PATH, then `python -m module` as a last resort."""
    bindir = os.path.dirname(sys.executable)
    for candidate in (os.path.join(bindir, name), shutil.which(name)):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    if module:
        return f"{sys.executable} -m {module}"
    lit_config.fatal(f"cannot find '{name}' (install the test extras: pip install -e .[compiler,test])")


autosp_opt = _tool("autosp-opt", "autosp.cli.opt")
filecheck = _tool("filecheck", "filecheck")

# FileCheck first so that the `%FileCheck` spelling is not half-replaced by a `FileCheck` rule.
config.substitutions.append(("%FileCheck", filecheck))
config.substitutions.append(("%autosp-opt", autosp_opt))
config.substitutions.append(("FileCheck", filecheck))

# Keep the environment small and deterministic: no GPU probing, single-threaded torch start-up.
for var in ("HOME", "PATH", "PYTHONPATH", "VIRTUAL_ENV", "TMPDIR", "PYENV_VERSION"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.environment["CUDA_VISIBLE_DEVICES"] = ""
config.environment["OMP_NUM_THREADS"] = "1"
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
