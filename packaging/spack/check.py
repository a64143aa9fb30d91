"""Loads the Spack package with stand-ins for Spack's modules and checks what Spack
would read of it: its class and build system, a v2 repository's imports, the C compiler
dependency, the +slurm and +flux variants and what they pull in, and the hook. Spack
itself is not installed in CI (nor could it be fetched here); this catches a recipe
that would not load, or that lost one of those."""
import pathlib
import sys
import types

here = pathlib.Path(__file__).parent
recorded = {"version": [], "variant": [], "depends_on": [], "license": [], "maintainers": []}


def directive(name):
    def record(*args, **kwargs):
        recorded[name].append((args, kwargs))
    return record


class MakefilePackage:
    pass


def run_after(phase):
    def mark(f):
        f.run_after = phase
        return f
    return mark


package = types.ModuleType("spack.package")
for name in recorded:
    setattr(package, name, directive(name))
package.run_after = run_after
package.force_remove = lambda *a: None
package.join_path = lambda *a: "/".join(a)
package.__all__ = list(recorded) + ["run_after", "force_remove", "join_path"]
spack = types.ModuleType("spack")
spack.package = package
makefile = types.ModuleType("spack_repo.builtin.build_systems.makefile")
makefile.MakefilePackage = MakefilePackage
for mod in ["spack_repo", "spack_repo.builtin", "spack_repo.builtin.build_systems"]:
    sys.modules[mod] = types.ModuleType(mod)
sys.modules.update({"spack": spack, "spack.package": package,
                    "spack_repo.builtin.build_systems.makefile": makefile})

repo = here / "spack_repo" / "binder"
assert "api: v2.0" in (repo / "repo.yaml").read_text(), "repo.yaml is not a v2 repository"
source = repo / "packages" / "binder_hpc" / "package.py"
namespace = {}
exec(compile(source.read_text(), str(source), "exec"), namespace)
cls = namespace["BinderHpc"]
assert issubclass(cls, MakefilePackage)
deps = {args[0]: kwargs for args, kwargs in recorded["depends_on"]}
assert deps["c"].get("type") == "build", deps
assert deps["slurm@22.05:25.11"].get("when") == "+slurm", deps
# The releases binder is tested with (#65): no older flux-core than CI's 0.88.
assert deps["flux-core@0.88:"].get("when") == "+flux", deps
assert "hwloc@2.8:" in deps and "rust@1.85:" in deps, deps
variants = {args[0] for args, _ in recorded["variant"]}
assert variants == {"slurm", "flux"}, variants
assert recorded["version"], "no version"
assert getattr(cls.plugins_asked_for, "run_after", None) == "install"
print(f"spack: {source.relative_to(here.parent.parent)} loads: variants {sorted(variants)}, "
      f"{len(deps)} dependencies, versions {[a[0] for a, _ in recorded['version']]}")
