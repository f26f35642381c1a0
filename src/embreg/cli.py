"""The ``embreg`` command line.

embreg --version
embreg run RECIPE|FILE.yaml [--set key=value ...] [--seeds N] [--out DIR] [--resume | --overwrite]
torchrun --nproc_per_node=N --no-python embreg run RECIPE ...   (data-parallel: embreg.train.distributed)
embreg show RECIPE|FILE.yaml [--set key=value ...]
embreg list [--json]
embreg data fetch NAME [--force]
embreg compare DIR DIR ... [--metrics m1,m2 | --all]
embreg sweep RECIPE --trials N [--set key=value ...] [--out DIR]
embreg baseline NAME RECIPE|FILE.yaml [--set data.key=value | baseline.key=value ...] [--out DIR] [--samples N]
embreg demo [--seeds N] [--out DIR]
embreg predict | recommend | score | export RUN ...   (using a trained run: embreg.serving.cli)
embreg translate RUN [--input FILE] [--beam N]      (translation runs: embreg.serving.translate_command)

Errors print one line, ``embreg: error: ...``, and exit with status 2. Output cut short by its reader
(``embreg list --json | head``) ends the command quietly with status 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import select
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from embreg.cli_arguments import int_at_least, positive_int
from embreg.errors import EmbregError, TrainingError


def _default_out(name: str) -> Path:
    """``runs/<name>-<date>-<time>-<6 random hex digits>``: unique also for runs started in the same second."""
    return Path("runs") / f"{Path(name).stem}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


PLURALS = {"analysis": "analyses", "index_transform": "index transforms"}


def cmd_run(args: argparse.Namespace) -> int:
    from embreg.recipes import load_recipe
    from embreg.recipes.run import run_seeds, run_single
    from embreg.train.distributed import broadcast_from_main, process_group

    recipe = load_recipe(args.recipe, args.set)
    with process_group(recipe.train.device) as env:  # under torchrun: one process of a DDP run
        # every rank writes to the directory rank 0 names (a default name holds a time stamp)
        out = broadcast_from_main(Path(args.out) if args.out else _default_out(recipe.name), env)
        if args.seeds > 1:
            summary = run_seeds(recipe, out, args.seeds, resume=args.resume, overwrite=args.overwrite)
        else:
            result = run_single(recipe, out, resume=args.resume, overwrite=args.overwrite)
    if not env.is_main:
        return 0
    if args.seeds > 1:
        print(f"\n{recipe.name}: {args.seeds} seeds -> {out}")
        for key, stats in summary.items():
            print(
                f"  {key:24s} {stats['mean']:.4f} ± {stats['std']:.4f}  (median {stats['median']:.4f}, "
                f"max {stats['max']:.4f})"
            )
    else:
        print(f"\n{recipe.name} -> {out}")
        for key, value in result.metrics.items():
            print(f"  {key:24s} {value:.4f}" if isinstance(value, float) else f"  {key:24s} {value}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from embreg.recipes import load_recipe
    from embreg.recipes.show import show_text

    recipe = load_recipe(args.recipe, args.set)
    title = f"embreg show {args.recipe}: every default filled in; empty sections left out or commented"
    print(show_text(recipe, title), end="")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from embreg.data import list_datasets
    from embreg.recipes import list_recipes
    from embreg.registry import REGISTRY, SLOTS

    recipes = list_recipes()
    datasets = list_datasets()
    if args.json:
        import json

        print(
            json.dumps(
                {
                    "recipes": recipes,
                    "datasets": {info.name: info.description for info in datasets},
                    "registry": {
                        slot: [entry.describe() for entry in REGISTRY.entries(slot).values()] for slot in SLOTS
                    },
                },
                indent=2,
            )
        )
        return 0
    print("recipes:")
    for name, description in recipes.items():
        print(f"  {name:24s} {description}")
    print("datasets:")
    for info in datasets:
        print(f"  {info.name:24s} {info.description}")
    for slot in SLOTS:
        print(f"{PLURALS.get(slot, slot.replace('_', ' ') + 's')}:")
        for entry in REGISTRY.entries(slot).values():
            needs = f" [needs {', '.join(entry.requires)}]" if entry.requires else ""
            reference = f" ({entry.reference})" if entry.reference else ""
            print(f"  {entry.name:24s} {entry.summary}{needs}{reference}")
            if slot == "model":
                print(f"  {'':24s} {entry.accepts_line()}")
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from embreg.data import fetch, list_datasets

    if args.action == "list":
        for info in list_datasets():
            print(f"{info.name:16s} {info.description}")
        return 0
    if not args.name:
        raise EmbregError("embreg data fetch needs a dataset NAME (see 'embreg data list')")
    path = fetch(args.name, force=args.force)
    print(f"{args.name}: {path}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from embreg.analysis.compare import compare_runs, format_markdown

    metrics = args.metrics.split(",") if args.metrics else None
    dirs = [Path(d) for d in args.dirs]
    result = compare_runs(dirs, baseline=args.baseline, metrics=metrics, selection="test" if args.all else "headline")
    for warning in result.warnings:
        print(f"embreg: warning: {warning}", file=sys.stderr)
    text = format_markdown(result)
    if args.full or args.boxplot:
        from embreg.analysis.stability import box_plot, stability_markdown

        dirs = [Path(d) for d in args.dirs]
        text += "".join(
            f"\n{m}: mean, std, median, max, min, generalisation gap, p-values against the baseline\n\n"
            + stability_markdown(dirs, m, baseline=args.baseline)
            for m in result.metrics
        )
        if args.boxplot:
            box_plot(dirs, result.metrics[0], args.boxplot)
            text += f"\nbox plot of {result.metrics[0]}: {args.boxplot}\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from embreg.recipes.sweep import sweep

    out = Path(args.out) if args.out else _default_out(f"sweep-{Path(args.recipe).stem}")
    best = sweep(args.recipe, trials=args.trials, overrides=args.set, out_dir=out, seed=args.seed)
    print(f"\nbest {best['monitor']} = {best['value']:.4f} with:")
    for key, value in best["params"].items():
        print(f"  {key} = {value}")
    if best["failed"]:
        print(f"{best['failed']} of {args.trials} trials failed; their errors are in trials.csv")
    print(f"trials and best values: {out}")
    return 0


def cmd_baseline(args: argparse.Namespace) -> int:
    import json

    from embreg.errors import ConfigError
    from embreg.recipes import load_recipe
    from embreg.recipes.baselines import run_baseline, split_options
    from embreg.runs.output_paths import check_output_directory

    overrides, options = split_options(args.set)
    unused = [o for o in overrides if not o.startswith("data.")]
    if unused:
        raise ConfigError(
            f"--set {unused[0]}: a baseline reads only the recipe's data section (data.KEY=VALUE) and its own options "
            "(baseline.KEY=VALUE)"
        )
    out = Path(args.out) if args.out else None
    if out is not None:
        check_output_directory(out)
        if out.is_dir() and any(out.iterdir()):
            raise ConfigError(f"--out {out} is a folder that is not empty; give a new one")
    recipe = load_recipe(args.recipe, overrides)
    result = run_baseline(args.name, recipe, options)
    print(
        f"{args.name} on {recipe.name}'s data ({', '.join(f'{k} {v}' for k, v in result.record['pairs'].items())} pairs)"
    )
    for key, value in result.metrics.items():
        print(f"  {key:24s} {value:.4f}")
    for row in result.outputs.get("test", [])[: args.samples]:
        print(
            f"\n  source:    {row['source']}\n  reference: {row['reference']}\n  {args.name + ':':10s} {row['output']}"
        )
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "metrics.json").write_text(json.dumps(result.metrics, indent=2) + "\n")
        (out / "record.json").write_text(json.dumps(result.record, indent=2, default=str) + "\n")
        for split, rows in result.outputs.items():
            lines = ["source\treference\toutput"] + [f"{r['source']}\t{r['reference']}\t{r['output']}" for r in rows]
            (out / f"translations-{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"\nmetrics, record and translations: {out}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from embreg.demo import run_demo

    out = Path(args.out) if args.out else _default_out("demo")
    text = run_demo(out, seeds=args.seeds, workers=args.workers, overwrite=args.overwrite)
    print()
    print(text, end="")
    print(f"\nrun directories and this table (demo.md): {out}")
    return 0


def installed_version() -> str:
    """The installed distribution's version (``importlib.metadata``), else the package's ``__version__``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("embreg")
    except PackageNotFoundError:  # run from a source tree that was never installed
        from embreg import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="embreg", description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"embreg {installed_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="train a recipe (one seed, or several with --seeds)")
    run.add_argument("recipe", help="a shipped recipe name (embreg list) or a YAML file")
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value (data.path=FILE trains on your file: the shipped recipe's sizes you do not set "
        "give way when the file is too small, data.fit_to_file; a value you set is used as given)",
    )
    run.add_argument(
        "--seeds",
        type=positive_int,
        default=1,
        help="number of training seeds (train.seed, +1, ...); with --resume at least as many as the run holds",
    )
    run.add_argument("--out", help="run directory (default runs/<recipe>-<time>-<random>); one run's alone")
    again = run.add_mutually_exclusive_group()
    again.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out (its config must match, but for more epochs, device, precision, loggers ...; "
        "its kernels must take the backends it drew with, see backends.json)",
    )
    again.add_argument(
        "--overwrite", action="store_true", help="delete the run in --out first (only a run's own files are deleted)"
    )
    run.set_defaults(func=cmd_run)

    show = sub.add_parser("show", help="print a recipe with every default filled in (YAML)")
    show.add_argument("recipe", help="a shipped recipe name (embreg list) or a YAML file")
    show.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config value")
    show.set_defaults(func=cmd_show)

    listing = sub.add_parser("list", help="list recipes, datasets, tasks, models and techniques")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(func=cmd_list)

    data = sub.add_parser("data", help="dataset registry")
    data.add_argument("action", choices=["fetch", "list"])
    data.add_argument("name", nargs="?")
    data.add_argument("--force", action="store_true", help="fetch again even if cached")
    data.set_defaults(func=cmd_data)

    compare = sub.add_parser("compare", help="compare run directories (mean ± std, Welch and Mann-Whitney p)")
    compare.add_argument("dirs", nargs="+")
    compare.add_argument("--metrics", help="comma-separated metric keys (default: the task's headline test metrics)")
    compare.add_argument("--all", action="store_true", help="every test_* metric instead of the headline ones")
    compare.add_argument("--baseline", type=int, default=0, help="index of the baseline directory")
    compare.add_argument("--out", help="also write the markdown table to this file")
    compare.add_argument(
        "--full", action="store_true", help="also median, max, min and the generalisation gap (train - test) per metric"
    )
    compare.add_argument("--boxplot", metavar="PNG", help="box plot of the first metric's per-seed values")
    compare.set_defaults(func=cmd_compare)

    sweep = sub.add_parser("sweep", help="tune a recipe's 'search' space on the validation split (Optuna)")
    sweep.add_argument("recipe")
    sweep.add_argument(
        "--trials",
        type=int,
        default=20,
        help="trials to run; one that fails (diverges, overflows, a refused value) is recorded in trials.csv and the "
        "search goes on",
    )
    sweep.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    sweep.add_argument("--seed", type=int, default=0, help="sampler seed")
    sweep.add_argument("--out")
    sweep.set_defaults(func=cmd_sweep)

    baseline = sub.add_parser(
        "baseline", help="learn and score a non-neural baseline (lexicon) on a recipe's data split, no training"
    )
    baseline.add_argument("name", help="a registered baseline (embreg list: baselines), e.g. lexicon")
    baseline.add_argument("recipe", help="the recipe whose data section (pairs, split, subsets) it reads")
    baseline.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="data.KEY=VALUE or baseline.KEY=VALUE"
    )
    baseline.add_argument("--out", help="an empty or new folder: metrics.json, record.json, translations-*.tsv")
    baseline.add_argument(
        "--samples", type=int_at_least(0), default=5, help="test translations printed beside their references"
    )
    baseline.set_defaults(func=cmd_baseline)

    from embreg.studies.cli import add_study_parser

    add_study_parser(sub)
    from embreg.serving.cli import add_serving_parsers
    from embreg.serving.translate_command import add_translate_parser

    add_serving_parsers(sub)
    add_translate_parser(sub)

    demo = sub.add_parser("demo", help="what SSE and dropout buy on MovieLens-100k: p-values and cost per step")
    demo.add_argument("--seeds", type=positive_int, default=5)
    demo.add_argument("--workers", type=positive_int, default=2, help="runs trained at a time")
    demo.add_argument("--out")
    demo.add_argument("--overwrite", action="store_true", help="delete an earlier demo in --out first")
    demo.set_defaults(func=cmd_demo)
    return parser


def _refuse_torchrun(command: str) -> None:
    from embreg.errors import ConfigError
    from embreg.train.distributed import launched_by_torchrun

    if launched_by_torchrun():
        raise ConfigError(
            f"'embreg {command}' does not run under torchrun; only 'embreg run' trains data-parallel "
            "(torchrun --nproc_per_node=N --no-python embreg run RECIPE ...)"
        )


def _stdout_closed_by_reader() -> bool:
    """Whether stdout is a pipe whose reader has gone (``embreg list --json | head``): poll reports an error on it.

    Where poll or a file descriptor is missing (Windows, a replaced ``sys.stdout``) a broken pipe is taken to be
    stdout's, as Python's documentation advises."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    if not hasattr(select, "poll"):
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _silence_stdout() -> None:
    """Points stdout at the null device, so that the interpreter's final flush does not fail again."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status.

    Errors of bad input or failed training print one line, ``embreg: error: ...``, and return 2; so does an
    allocation that the machine's memory cannot hold. When the reader of stdout goes away (``embreg list --json |
    head``) the command stops quietly with status 0: the reader took what it wanted, which is no error for the user.
    """
    args = build_parser().parse_args(argv)
    try:
        if args.func is not cmd_run:
            _refuse_torchrun(args.command)
        return args.func(args)
    except (EmbregError, TrainingError) as error:
        print(f"embreg: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("embreg: interrupted; continue with --resume and the same --out", file=sys.stderr)
        return 130
    except BrokenPipeError:
        if not _stdout_closed_by_reader():
            raise  # a pipe of the run itself (a worker, a logger), not the reader of stdout
        _silence_stdout()
        return 0
    except (MemoryError, RuntimeError) as error:
        from embreg.recipes.allocation import allocation_failure

        size = allocation_failure(error)
        if size is None:
            raise
        print(
            f"embreg: error: out of memory: an allocation asked for {size}. Choose smaller sizes (model dimensions, "
            "train.batch_size) or a machine with more memory",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
