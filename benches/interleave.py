#!/usr/bin/env python3
"""Times commands in interleaved rounds: each round runs every command once, in a new
random order, so a VM whose speed drifts over a minute (the 2-CPU CI VM does, by 20% and
more) slows every command alike instead of whichever hyperfine happened to run last.
Prints one JSON object: command -> {"wall": median seconds, "cpu": median user+system
seconds of the command and its children}. stdout and stderr of the commands are discarded.

With GAP=SECONDS in the environment, each run waits that long first (untimed): a launch
after a quiet spell, when nothing a launch shares with the next is fresh any more.

A COMMAND may start with `NAME=value` words (set in its environment, as the shell does)
and with `@session` (run in a session of its own: a new process group, so binder sees a
new job), both applied by posix_spawn itself: no `env` or `setsid` executable is timed.

Usage: interleave.py ROUNDS COMMAND [COMMAND ...]   (each COMMAND one shell-quoted string)
"""
import json
import os
import random
import shlex
import statistics
import sys
import time


def parse(command):
    """(argv, environment, new session) of one COMMAND."""
    words = shlex.split(command)
    env = dict(os.environ)
    session = False
    while words and (words[0] == "@session" or ("=" in words[0] and not words[0].startswith("/"))):
        word = words.pop(0)
        if word == "@session":
            session = True
        else:
            name, _, value = word.partition("=")
            env[name] = value
    return words, env, session


def main():
    rounds = int(sys.argv[1])
    commands = sys.argv[2:]
    argvs = [parse(c) for c in commands]
    devnull = os.open(os.devnull, os.O_WRONLY)
    actions = [(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]

    gap = float(os.environ.get("GAP", "0"))

    def once(spec):
        argv, env, session = spec
        if gap:
            time.sleep(gap)
        start = time.perf_counter()
        pid = os.posix_spawnp(argv[0], argv, env, file_actions=actions, setsid=session)
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
