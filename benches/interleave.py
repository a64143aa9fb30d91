#!/usr/bin/env python3
"""Times commands in interleaved rounds: each round runs every command once, in a new
random order, so a VM whose speed drifts over a minute (the 2-CPU CI VM does, by 20% and
more) slows every command alike instead of whichever hyperfine happened to run last.
Prints one JSON object: command -> {"wall": median seconds, "cpu": median user+system
seconds of the command and its children}. stdout and stderr of the commands are discarded.

With GAP=SECONDS in the environment, each run waits that long first (untimed): a launch
after a quiet spell, when nothing a launch shares with the next is fresh any more.

A COMMAND that starts with `@paced` runs exactly GAP x (number of commands) after its
last run: it opens every round, and the other commands follow it in a random order, GAP
apart. Where a command's cost depends on the time since its own last run (binder's look
at the kernel is cheap within a window of it), a random order alone would space its runs
anywhere from one GAP to twice the round, and time a mix of two cases.

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
    paced = False
    while words and (words[0] in ("@session", "@paced") or ("=" in words[0] and not words[0].startswith("/"))):
        word = words.pop(0)
        if word == "@session":
            session = True
        elif word == "@paced":
            paced = True
        else:
            name, _, value = word.partition("=")
            env[name] = value
    return words, env, session, paced


def main():
    rounds = int(sys.argv[1])
    commands = sys.argv[2:]
    argvs = [parse(c) for c in commands]
    devnull = os.open(os.devnull, os.O_WRONLY)
    actions = [(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]

    gap = float(os.environ.get("GAP", "0"))

    slot = [time.perf_counter()]

    def once(spec):
        argv, env, session, _ = spec
        if gap:
            # Each run starts GAP after the last one started (not after it ended), so a
            # paced command's runs are exactly a round apart whatever the others cost.
            slot[0] = max(slot[0] + gap, time.perf_counter())
            time.sleep(max(0.0, slot[0] - time.perf_counter()))
        start = time.perf_counter()
        pid = os.posix_spawnp(argv[0], argv, env, file_actions=actions, setsid=session)
        _, _, usage = os.wait4(pid, 0)
        return time.perf_counter() - start, usage.ru_utime + usage.ru_stime

    for argv in argvs:  # warm the page cache and binder's node cache
        for _ in range(20):
            once(argv)
    wall = {c: [] for c in commands}
    cpu = {c: [] for c in commands}
    paced = [i for i, a in enumerate(argvs) if a[3]]
    for _ in range(rounds):
        order = [i for i in range(len(commands)) if i not in paced]
        random.shuffle(order)
        order = paced + order
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
