# Copyright binder developers. SPDX-License-Identifier: (Apache-2.0 OR MIT)
"""binder's Spack recipe: `spack install binder` (put this directory in a repo's
packages/binder/). It calls the same `make` and `make install PREFIX=...` as the .deb,
the RPM and a site's own build."""

from spack.package import *


class Binder(MakefilePackage):
    """Pin every task of a parallel job to the right CPUs and GPUs of its node: a
    launcher (mpirun, srun, flux run), a Slurm SPANK plugin and a Flux shell plugin
    that bind each task from the node's hwloc topology and a small YAML shape."""

    homepage = "https://github.com/binder-hpc/binder"
    git = "https://github.com/binder-hpc/binder.git"

    license("Apache-2.0 OR MIT")

    version("main", branch="main")

    depends_on("rust@1.85:", type="build")
    depends_on("gmake", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("hwloc@2.8:")
    # The SPANK plugin's FFI is checked against the Slurm it is built with (spank.h).
    depends_on("slurm", type="build")

    @property
    def build_targets(self):
        return ["build"]

    @property
    def install_targets(self):
        # Plugin configuration goes under the prefix's etc; a site links or includes it
        # from its Slurm plugstack.conf and Flux's etc/flux/shell/lua.d.
        return ["install", f"PREFIX={self.prefix}"]
