# Copyright binder developers. SPDX-License-Identifier: (Apache-2.0 OR MIT)
"""binder's Spack package, for a v2 package repository (Spack 1.0 and later):

    spack repo add packaging/spack/spack_repo/binder
    spack install binder-hpc +slurm +flux

Spack's builtin `binder` is another program (RosettaCommons' C++ binding generator), so
this one is `binder-hpc`. It runs the same `make` and `make install PREFIX=...` as the
.deb, the RPM and a site's own build."""

from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *


class BinderHpc(MakefilePackage):
    """Pin every task of a parallel job to the right CPUs and GPUs of its node: a
    launcher wrapper (mpirun, srun, flux run), a Slurm SPANK plugin and a Flux shell
    plugin that bind each task from the node's hwloc topology and a small YAML shape."""

    homepage = "https://github.com/binder-hpc/binder"
    git = "https://github.com/binder-hpc/binder.git"

    maintainers("binder-hpc")

    license("Apache-2.0 OR MIT", checked_by="binder-hpc")

    # A release adds its line here with the sha256 `tools/dist.sh` prints for its
    # source tarball (binder-VERSION.tar.gz, published with the release).
    version("main", branch="main")

    variant("slurm", default=False, description="Build and install the Slurm SPANK plugin")
    variant("flux", default=False, description="Install the Flux job shell plugin")

    depends_on("c", type="build")  # cargo links with the C compiler
    depends_on("rust@1.85:", type="build")
    depends_on("gmake", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("hwloc@2.8:")
    # The SPANK plugin is built against this Slurm's headers (its plugin_version), and
    # loads only in that release series; its FFI is checked against 22.05 and 25.11 (CI).
    depends_on("slurm@22.05:25.11", when="+slurm")
    # The Flux plugin resolves the shell's symbols when flux-shell loads it; it is built
    # and tested against flux-core 0.88 (third_party/flux), whose shell plugin API older
    # releases (Spack's 0.81) do not all have.
    depends_on("flux-core@0.88:", type="run", when="+flux")

    def setup_build_environment(self, env):
        if self.spec.satisfies("+slurm"):
            env.set("SLURM_INCLUDE_DIR", self.spec["slurm"].prefix.include)

    @property
    def build_targets(self):
        return ["build"]

    @property
    def install_targets(self):
        # Plugin configuration goes under the prefix's etc; a site links or includes it
        # from its Slurm plugstack.conf and Flux's etc/flux/shell/lua.d.
        return ["install", f"PREFIX={self.prefix}"]

    @run_after("install")
    def plugins_asked_for(self):
        """A plugin the spec did not ask for is not installed (`make install` leaves out
        a SPANK plugin built without Slurm's headers by itself)."""
        if self.spec.satisfies("~slurm"):
            force_remove(join_path(self.prefix.lib, "binder", "libbinder_spank.so"))
            force_remove(join_path(self.prefix.etc, "slurm", "plugstack.conf.d", "binder.conf"))
        if self.spec.satisfies("~flux"):
            force_remove(join_path(self.prefix.lib, "binder", "libbinder_flux.so"))
            force_remove(join_path(self.prefix.etc, "flux", "shell", "lua.d", "binder.lua"))
