# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_binder_global_optspecs
    string join \n n/dry-run local-rank= local-size= gpus-per-task= ge= reserve= pack= share gpu-ids= ge-topology= topology= synthetic= i/input= format= cpuset-output-format= show-env report v/verbose h/help V/version
end

function __fish_binder_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_binder_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_binder_using_subcommand
    set -l cmd (__fish_binder_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c binder -n "__fish_binder_needs_command" -l local-rank -d 'This task\'s rank among the tasks of its node (default: from the launcher, else 0)' -r
complete -c binder -n "__fish_binder_needs_command" -l local-size -d 'Number of tasks on this node (default: from the launcher, else 1)' -r
complete -c binder -n "__fish_binder_needs_command" -l gpus-per-task -d 'GPUs given to each task; overrides the shape\'s `options.gpus-per-task`' -r
complete -c binder -n "__fish_binder_needs_command" -l ge -d 'A Grid Engine request in qsub\'s words: "-bunit C -bamount 2 -btype host" (OCS 9.1) or "-binding linear:4" (SGE 6.2u5); overrides the shape\'s `options.ge`' -r
complete -c binder -n "__fish_binder_needs_command" -l reserve -d 'Keep these units from every task (`first-core`, `first-core-per-socket`, `core:0`, `package:1.core:0`, `pu:0-1`); adds to the shape\'s `options.reserve`' -r
complete -c binder -n "__fish_binder_needs_command" -l pack -d 'Where to go on a node other jobs use (default fill); overrides `options.pack`' -r -f -a "spread\t'Freest containers first (OCS -bsort S)'
fill\t'Partly used containers first (OCS -bsort s)'
exclusive\t'Whole free containers only, kept from other jobs (OCS -bstart S -bstop S)'"
complete -c binder -n "__fish_binder_needs_command" -l gpu-ids -d 'How GPU variables name the task\'s GPUs; overrides `options.gpu-ids`' -r -f -a "index\t'Each runtime\'s own index (CUDA, Level Zero: PCI order; ROCm: its own)'
uuid\t'GPU-UUID strings (from hwloc\'s NVIDIAUUID/AMDUUID), where the topology has them'"
complete -c binder -n "__fish_binder_needs_command" -l ge-topology -d 'Use a Grid Engine topology string as the machine, e.g. NSXCCccSXCCCC; lowercase units are taken by other jobs (dry-run only)' -r
complete -c binder -n "__fish_binder_needs_command" -l topology -d 'Read the topology from an hwloc XML export instead of this host (dry-run only)' -r -F
complete -c binder -n "__fish_binder_needs_command" -l synthetic -d 'Use an hwloc synthetic topology, e.g. "pack:2 numa:2 core:8 pu:2" (dry-run only)' -r
complete -c binder -n "__fish_binder_needs_command" -s i -l input -d 'hwloc\'s spelling: an XML file if one exists at that path, else a synthetic description' -r
complete -c binder -n "__fish_binder_needs_command" -l format -d 'Dry-run output format (default: text)' -r -f -a "text\t'Aligned lines for people'
json\t'One JSON object per rank per line'
pe\t'The pe_hostfile fourth column of a Grid Engine request (`0,0:0,1`)'
rankfile\t'An Open MPI rankfile for the node\'s tasks'
map\t'The node drawn in the terminal, each PU labelled with its rank'
svg\t'The node as an lstopo-like SVG picture, ranks coloured'"
complete -c binder -n "__fish_binder_needs_command" -l cpuset-output-format -l cof -d 'How the dry-run text form prints cpusets (default: hwloc)' -r -f -a "hwloc\t'hwloc bitmap string, 0x0000000f,,0x00000001'
list\t'Range list, 0-3,64'
taskset\t'taskset hex, 0x1000000000000000f'"
complete -c binder -n "__fish_binder_needs_command" -s n -l dry-run -d 'Print the placement of every local task instead of running anything'
complete -c binder -n "__fish_binder_needs_command" -l share -d 'Take units other jobs hold when too few are free, rather than refuse'
complete -c binder -n "__fish_binder_needs_command" -l show-env -d 'Dry-run text: print under each rank the variables binder would set (JSON has `env`)'
complete -c binder -n "__fish_binder_needs_command" -l report -d 'Print this task\'s binding on stderr before running it (also BINDER_REPORT=1)'
complete -c binder -n "__fish_binder_needs_command" -s v -l verbose -d 'Say which launcher and variables gave the task identity, and warn about inherited bindings narrower than the allowed CPUs'
complete -c binder -n "__fish_binder_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c binder -n "__fish_binder_needs_command" -s V -l version -d 'Print version'
complete -c binder -n "__fish_binder_needs_command" -a "schema" -d 'Print the JSON Schema of the shape format'
complete -c binder -n "__fish_binder_needs_command" -a "topology" -d 'Print the node\'s Grid Engine topology string (NSXYCTT...; lowercase = reserved)'
complete -c binder -n "__fish_binder_needs_command" -a "node" -d 'Show the jobs bound on this node and its packing metrics (the node ledger)'
complete -c binder -n "__fish_binder_needs_command" -a "explain" -d 'Explain a plan: the unit\'s rule, what each request matched or skipped, the dealing'
complete -c binder -n "__fish_binder_needs_command" -a "convert" -d 'Print the shape for a peer tool\'s binding options (Open MPI, Slurm, numactl, hwloc-bind)'
complete -c binder -n "__fish_binder_needs_command" -a "generate" -d 'Print the man page or a shell completion script (for packagers)'
complete -c binder -n "__fish_binder_using_subcommand schema" -s h -l help -d 'Print help'
complete -c binder -n "__fish_binder_using_subcommand topology" -l topology -d 'An hwloc XML export' -r -F
complete -c binder -n "__fish_binder_using_subcommand topology" -l synthetic -d 'An hwloc synthetic description' -r
complete -c binder -n "__fish_binder_using_subcommand topology" -l ge-topology -d 'A Grid Engine topology string (rewritten in binder\'s product form)' -r
complete -c binder -n "__fish_binder_using_subcommand topology" -l reserve -d 'Units to show reserved (`first-core`, `core:0`, ...), besides the site\'s' -r
complete -c binder -n "__fish_binder_using_subcommand topology" -s h -l help -d 'Print help'
complete -c binder -n "__fish_binder_using_subcommand node" -l format -d 'Output format (default: text)' -r -f -a "text\t'Tables for people'
json\t'One JSON object'"
complete -c binder -n "__fish_binder_using_subcommand node" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c binder -n "__fish_binder_using_subcommand explain" -l local-rank -d 'Show only this task\'s placement in the plan (default: every task)' -r
complete -c binder -n "__fish_binder_using_subcommand explain" -l local-size -d 'Number of tasks on this node (default: from the launcher, else 1)' -r
complete -c binder -n "__fish_binder_using_subcommand explain" -l gpus-per-task -d 'GPUs given to each task; overrides the shape\'s `options.gpus-per-task`' -r
complete -c binder -n "__fish_binder_using_subcommand explain" -l ge -d 'A Grid Engine request in qsub\'s words; overrides the shape\'s `options.ge`' -r
complete -c binder -n "__fish_binder_using_subcommand explain" -l reserve -d 'Keep these units from every task; adds to the shape\'s `options.reserve`' -r
complete -c binder -n "__fish_binder_using_subcommand explain" -l pack -d 'Where to go on a node other jobs use; overrides `options.pack`' -r -f -a "spread\t'Freest containers first (OCS -bsort S)'
fill\t'Partly used containers first (OCS -bsort s)'
exclusive\t'Whole free containers only, kept from other jobs (OCS -bstart S -bstop S)'"
complete -c binder -n "__fish_binder_using_subcommand explain" -l topology -d 'An hwloc XML export instead of this host' -r -F
complete -c binder -n "__fish_binder_using_subcommand explain" -l synthetic -d 'An hwloc synthetic description' -r
complete -c binder -n "__fish_binder_using_subcommand explain" -s i -l input -d 'hwloc\'s spelling: an XML file if one exists at that path, else a synthetic description' -r
complete -c binder -n "__fish_binder_using_subcommand explain" -l ge-topology -d 'A Grid Engine topology string as the machine' -r
complete -c binder -n "__fish_binder_using_subcommand explain" -l share -d 'Take units other jobs hold when too few are free, rather than refuse'
complete -c binder -n "__fish_binder_using_subcommand explain" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c binder -n "__fish_binder_using_subcommand convert" -l from -d 'Whose options follow `--`' -r -f -a "ompi\t'Open MPI 4.1\'s mpirun (ORTE): --map-by, --bind-to, --rank-by, --use-hwthread-cpus'
ompi5\t'Open MPI 5\'s mpirun (PRRTE 3): --map-by OBJ:PE=n:HWTCPUS, --bind-to, --rank-by fill|span'
mpich\t'MPICH\'s mpiexec (Hydra): -bind-to OBJ, OBJ:N or user:LIST, -map-by OBJ'
impi\t'Intel MPI: I_MPI_PIN_DOMAIN=core|socket|N, I_MPI_PIN_ORDER, I_MPI_PIN_PROCESSOR_LIST (NAME=VALUE words)'
slurm\t'Slurm\'s srun/sbatch: --cpu-bind, --distribution, -c, --hint, --ntasks-per-*'
numactl\t'numactl: --cpunodebind, --membind, --interleave, --localalloc, --preferred'
hwloc-bind\t'hwloc-bind: LOCATION... (core:0-3, socket:1, numa:0), --membind'
torchrun\t'torchrun: --numa-binding node|socket|exclusive|core-complex, --nproc-per-node'"
complete -c binder -n "__fish_binder_using_subcommand convert" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c binder -n "__fish_binder_using_subcommand generate" -s h -l help -d 'Print help (see more with \'--help\')'
