_binder() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="binder"
                ;;
            binder,convert)
                cmd="binder__subcmd__convert"
                ;;
            binder,explain)
                cmd="binder__subcmd__explain"
                ;;
            binder,generate)
                cmd="binder__subcmd__generate"
                ;;
            binder,node)
                cmd="binder__subcmd__node"
                ;;
            binder,schema)
                cmd="binder__subcmd__schema"
                ;;
            binder,topology)
                cmd="binder__subcmd__topology"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        binder)
            opts="-n -i -v -h -V --dry-run --local-rank --local-size --gpus-per-task --ge --reserve --pack --share --gpu-ids --ge-topology --topology --synthetic --input --format --cof --cpuset-output-format --show-env --report --verbose --help --version schema topology node explain convert generate"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --local-rank)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --local-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gpus-per-task)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ge)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reserve)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pack)
                    COMPREPLY=($(compgen -W "spread fill exclusive" -- "${cur}"))
                    return 0
                    ;;
                --gpu-ids)
                    COMPREPLY=($(compgen -W "index uuid" -- "${cur}"))
                    return 0
                    ;;
                --ge-topology)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --topology)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --synthetic)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --input)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -i)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "text json pe rankfile map svg" -- "${cur}"))
                    return 0
                    ;;
                --cpuset-output-format)
                    COMPREPLY=($(compgen -W "hwloc list taskset" -- "${cur}"))
                    return 0
                    ;;
                --cof)
                    COMPREPLY=($(compgen -W "hwloc list taskset" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        binder__subcmd__convert)
            opts="-h --from --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --from)
                    COMPREPLY=($(compgen -W "ompi ompi5 mpich impi slurm numactl hwloc-bind torchrun" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        binder__subcmd__explain)
            opts="-i -h --local-rank --local-size --gpus-per-task --ge --reserve --pack --share --topology --synthetic --input --ge-topology --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --local-rank)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --local-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gpus-per-task)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ge)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reserve)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pack)
                    COMPREPLY=($(compgen -W "spread fill exclusive" -- "${cur}"))
                    return 0
                    ;;
                --topology)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --synthetic)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --input)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -i)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ge-topology)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        binder__subcmd__generate)
            opts="-h --help man man-shape complete-bash complete-zsh complete-fish"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        binder__subcmd__node)
            opts="-h --format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        binder__subcmd__schema)
            opts="-h --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        binder__subcmd__topology)
            opts="-h --topology --synthetic --ge-topology --reserve --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --topology)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --synthetic)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ge-topology)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reserve)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _binder -o nosort -o bashdefault -o default binder
else
    complete -F _binder -o bashdefault -o default binder
fi

# Catalog names (`binder cores-packed -- ./app`) beside files, for the shape argument.
_binder_catalog() {
    local dir bin f
    bin=$(command -v binder 2>/dev/null)
    for dir in shapes "${bin%/bin/*}/share/binder/shapes" /usr/share/binder/shapes; do
        [ -d "$dir" ] || continue
        for f in "$dir"/*.yaml; do
            [ -e "$f" ] || continue
            f=${f##*/}
            echo "${f%.yaml}"
        done
    done
}
_binder_with_catalog() {
    _binder "$@"
    local cur=${COMP_WORDS[COMP_CWORD]} w i
    case "$cur" in -*) return ;; esac
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        case "$w" in
        --) return ;;
        schema|topology|node|convert|generate|help) [ "$i" = 1 ] && return ;;
        esac
    done
    COMPREPLY+=($(compgen -W "$(_binder_catalog | sort -u)" -- "$cur"))
}
complete -F _binder_with_catalog -o bashdefault -o default binder
