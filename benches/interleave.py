#!/usr/bin/env python3
"""Times commands in interleaved rounds: each round runs every command once, in a new
random order, so a VM whose speed drifts over a minute (the 2-CPU CI VM does, by 20% and
more) slows every command alike instead of whichever hyperfine happened to run last.
Prints one JSON object: command -> {"wall": median seconds, "cpu": median user+system
seconds of the command and its children}. stdout and stderr of the commands are discarded.

Usage: interleave.py ROUNDS COMMAND [COMMAND ...]   (each COMMAND one shell-quoted string)
"""
import json
import os
import random
import shlex
import statistics
import sys
import time


def main():
    rounds = int(sys.argv[1])
    commands = sys.argv[2:]
    argvs = [shlex.split(c) for c in commands]
    devnull = os.open(os.devnull, os.O_WRONLY)
    actions = [(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]

    def once(argv):
        start = time.perf_counter()
        pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=actions)
        _, _, usage = os.wait4(pid, 0)
        return time.perf_counter() - start, usage.ru_utime + usage.ru_stime

    for argv in argvs:  # warm the page cache and binder's node cache
        for _ in range(20):
            once(argv)
    wall = {c: [] for c in commands}
    cpu = {c: [] for c in commands}
    for _ in range(rounds):
        order = list(range(len(commands)))
        random.shuffle(order)
        for i in order:
            w, c = once(argvs[i])
            wall[commands[i]].append(w)
            cpu[commands[i]].append(c)
    json.dump(
        {c: {"wall": statistics.median(wall[c]), "cpu": statistics.median(cpu[c])} for c in commands},
        sys.stdout,
    )
    print()


if __name__ == "__main__":
    main()
