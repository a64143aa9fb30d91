# binder's build and install, as sites and packages call it (RPM's %make_install, Spack's
# MakefilePackage, a site's own build):
#
#   make                                   # cargo build --release
#   make install PREFIX=/usr DESTDIR=/tmp/root
#
# `install` installs what `make` built and builds nothing itself (so it can run as root
# without a Rust toolchain): both executables, the shape catalog, the man page, shell
# completions, the Slurm SPANK plugin and the Flux shell plugin, an example of each
# plugin's configuration where those launchers read it, and in DOCDIR both licence texts
# (MIT and Apache-2.0 travel with every copy), the third-party notices of every crate
# compiled in, the user guide and the changelog. PROFILE picks cargo's profile
# directory (release; CI installs its `ci` build). The plugins' catalog is this install's.

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
DOCDIR ?= $(DATADIR)/doc/binder
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
# Slurm includes plugstack.conf.d/*.conf from its plugstack.conf (Debian, RHEL); Flux's
# job shell reads lua.d under its own prefix's etc/flux/shell (/etc/flux/shell for a
# packaged Flux, /opt/flux/etc/flux/shell for one built with --prefix=/opt/flux).
SLURM_PLUGSTACK_DIR ?= $(SYSCONFDIR)/slurm/plugstack.conf.d
FLUX_SHELL_LUA_D ?= $(SYSCONFDIR)/flux/shell/lua.d
PROFILE ?= release
CARGO ?= cargo
CARGO_TARGET_DIR ?= target
# (cargo puts the `dev` profile's build in target/debug.)
OUT := $(CARGO_TARGET_DIR)/$(if $(filter dev,$(PROFILE)),debug,$(PROFILE))
CATALOG := $(DATADIR)/binder/shapes
SITE ?= 1
PLUGINS := $(LIBDIR)/binder

.PHONY: all build install install-user install-site uninstall check-built

all: build

build:
	$(CARGO) build --profile $(PROFILE)

check-built:
	@for f in binder binder-full libbinder_spank.so libbinder_flux.so; do \
	  [ -f "$(OUT)/$$f" ] || { echo "$(OUT)/$$f is not built: run \`make\` (or make PROFILE=$(PROFILE)) first" >&2; exit 1; }; \
	done

# A user's own install (`make install-user PREFIX=$$HOME/.local`): the executables, the
# catalog, the man pages, completions and docs, but no plugin and no Slurm or Flux
# configuration, which are a site's (a user's plugstack.conf.d is read by no slurmd).
install-user: SITE := 0
install-user: install

install: check-built
	install -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(CATALOG)" "$(DESTDIR)$(MANDIR)/man1" "$(DESTDIR)$(MANDIR)/man5" \
	  "$(DESTDIR)$(DATADIR)/bash-completion/completions" \
	  "$(DESTDIR)$(DATADIR)/zsh/site-functions" \
	  "$(DESTDIR)$(DATADIR)/fish/vendor_completions.d" "$(DESTDIR)$(DOCDIR)"
	install -m 644 LICENSE-MIT LICENSE-APACHE THIRD-PARTY-NOTICES.md docs/guide.md CHANGELOG.md "$(DESTDIR)$(DOCDIR)/"
	install -m 755 "$(OUT)/binder" "$(OUT)/binder-full" "$(DESTDIR)$(BINDIR)/"
	install -m 644 shapes/*.yaml "$(DESTDIR)$(CATALOG)/"
	install -m 644 docs/man/binder.1 "$(DESTDIR)$(MANDIR)/man1/binder.1"
	echo '.so man1/binder.1' >"$(DESTDIR)$(MANDIR)/man1/binder-full.1"
	chmod 644 "$(DESTDIR)$(MANDIR)/man1/binder-full.1"
	install -m 644 docs/man/binder-shape.5 "$(DESTDIR)$(MANDIR)/man5/binder-shape.5"
	install -m 644 completions/binder.bash "$(DESTDIR)$(DATADIR)/bash-completion/completions/binder"
	install -m 644 completions/_binder "$(DESTDIR)$(DATADIR)/zsh/site-functions/_binder"
	install -m 644 completions/binder.fish "$(DESTDIR)$(DATADIR)/fish/vendor_completions.d/binder.fish"
	@[ "$(SITE)" = 1 ] || echo "make install-user: no plugins and no Slurm or Flux configuration (a site's: make install)"
	@[ "$(SITE)" != 1 ] || $(MAKE) --no-print-directory install-site

# The plugins and their configuration where Slurm and Flux read it (a site's install).
install-site: check-built
	install -d "$(DESTDIR)$(PLUGINS)" "$(DESTDIR)$(SLURM_PLUGSTACK_DIR)" "$(DESTDIR)$(FLUX_SHELL_LUA_D)"
	install -m 755 "$(OUT)/libbinder_flux.so" "$(DESTDIR)$(PLUGINS)/"
	# The SPANK plugin only when it was built against a Slurm's headers: one built
	# without them (plugin_version 0) no Slurm loads, so it is left out, and said.
	# Inert until asked: `optional` loads the plugin without failing jobs where it
	# cannot load, and binds only steps that give --binder (add default=SHAPE to bind
	# every step that asks for no binding of its own).
	@if grep -qa 'binder-spank: UNLOADABLE' "$(OUT)/libbinder_spank.so"; then \
	  echo "make install: leaves out the Slurm plugin: it was built without Slurm's headers, and no Slurm would load it (install them, e.g. libslurm-dev, or set SLURM_INCLUDE_DIR, then make again)" >&2; \
	else \
	  install -m 755 "$(OUT)/libbinder_spank.so" "$(DESTDIR)$(PLUGINS)/" && \
	  printf '# binder SPANK plugin: srun --binder=SHAPE (a file, or a name in catalog=)\noptional %s/libbinder_spank.so catalog=%s\n' \
	    "$(PLUGINS)" "$(CATALOG)" >"$(DESTDIR)$(SLURM_PLUGSTACK_DIR)/binder.conf" && \
	  chmod 644 "$(DESTDIR)$(SLURM_PLUGSTACK_DIR)/binder.conf"; \
	fi
	# Inert unless a job asks (-o binder=SHAPE) or conf sets a site default.
	printf -- '-- binder Flux shell plugin: flux run -o binder=SHAPE (a file, or a catalog name)\nplugin.load { file = "%s/libbinder_flux.so", conf = { catalog = "%s" } }\n' \
	  "$(PLUGINS)" "$(CATALOG)" >"$(DESTDIR)$(FLUX_SHELL_LUA_D)/binder.lua"
	chmod 644 "$(DESTDIR)$(FLUX_SHELL_LUA_D)/binder.lua"

uninstall:
	rm -f "$(DESTDIR)$(BINDIR)/binder" "$(DESTDIR)$(BINDIR)/binder-full" \
	  "$(DESTDIR)$(MANDIR)/man1/binder.1" "$(DESTDIR)$(MANDIR)/man1/binder-full.1" \
	  "$(DESTDIR)$(MANDIR)/man5/binder-shape.5" \
	  "$(DESTDIR)$(DATADIR)/bash-completion/completions/binder" \
	  "$(DESTDIR)$(DATADIR)/zsh/site-functions/_binder" \
	  "$(DESTDIR)$(DATADIR)/fish/vendor_completions.d/binder.fish" \
	  "$(DESTDIR)$(SLURM_PLUGSTACK_DIR)/binder.conf" "$(DESTDIR)$(FLUX_SHELL_LUA_D)/binder.lua"
	rm -f "$(DESTDIR)$(DOCDIR)/LICENSE-MIT" "$(DESTDIR)$(DOCDIR)/LICENSE-APACHE" "$(DESTDIR)$(DOCDIR)/THIRD-PARTY-NOTICES.md" \
	  "$(DESTDIR)$(DOCDIR)/guide.md" "$(DESTDIR)$(DOCDIR)/CHANGELOG.md"
	rm -rf "$(DESTDIR)$(CATALOG)" "$(DESTDIR)$(PLUGINS)"
	# The directories install made, deepest first, each only when nothing else is in it
	# (a site's /usr/share/man stays; a fresh PREFIX=$$HOME/.local is left as it was).
	@for d in "$(DOCDIR)" "$(DATADIR)/doc" "$(DATADIR)/binder" "$(MANDIR)/man1" "$(MANDIR)/man5" \
	  "$(MANDIR)" "$(SLURM_PLUGSTACK_DIR)" "$(SYSCONFDIR)/slurm" "$(FLUX_SHELL_LUA_D)" \
	  "$(SYSCONFDIR)/flux/shell" "$(SYSCONFDIR)/flux" "$(DATADIR)/bash-completion/completions" \
	  "$(DATADIR)/bash-completion" "$(DATADIR)/zsh/site-functions" "$(DATADIR)/zsh" \
	  "$(DATADIR)/fish/vendor_completions.d" "$(DATADIR)/fish" "$(BINDIR)" "$(LIBDIR)" \
	  "$(DATADIR)" "$(SYSCONFDIR)" "$(PREFIX)"; do \
	  rmdir "$(DESTDIR)$$d" 2>/dev/null || true; \
	done
