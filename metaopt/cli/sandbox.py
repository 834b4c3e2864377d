"""`metaopt sandbox base|prune` and `metaopt benchmarks list`."""

from __future__ import annotations

import typer

from metaopt.cli.common import backend, err, fail

sandbox_app = typer.Typer(no_args_is_help=True, help="Sandbox images and cleanup.")
benchmarks_app = typer.Typer(no_args_is_help=True, help="Built-in and supported benchmarks.")


@sandbox_app.command("base")
def sandbox_base(
    tag: str = typer.Option("metaopt-base:latest", "--tag", help="Image tag to build."),
    mirror: str = typer.Option("http://deb.debian.org/debian", "--mirror", help="Debian mirror for debootstrap."),
) -> None:
    """Build the Debian base image (bash, python3, pytest, uv offline, tmux, git, build tools...)."""
    from metaopt.sandbox.base_image import build_base_image

    try:
        image = build_base_image(tag, mirror=mirror, progress=lambda line: err.print(f"[dim]{line}[/dim]"))
    except RuntimeError as e:
        fail(str(e))
    print(image)


@sandbox_app.command("prune")
def sandbox_prune(
    run_id: str | None = typer.Option(None, "--run", help="Only this run's containers."),
    images: bool = typer.Option(False, "--images", help="Also remove built task images."),
) -> None:
    """Remove every container, network and volume metaopt created (and optionally task images)."""
    counts = backend().prune(run_id, images=images)
    print(", ".join(f"{k}: {v}" for k, v in counts.items()))


@benchmarks_app.command("list")
def benchmarks_list() -> None:
    """List benchmark names."""
    from metaopt.benchmarks.registry import BENCHMARKS

    for name in BENCHMARKS.names():
        bench = BENCHMARKS.load(name)
        print(f"{bench.usage or name:24} {bench.description}")
