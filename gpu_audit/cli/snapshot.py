"""``gpu-audit snapshot FILE``: summarise a PyTorch memory snapshot offline."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from gpu_audit.cli.app import err
from gpu_audit.cli.declared import Option, command, json_option, out_option
from gpu_audit.errors import InputError, UsageError

OPTIONS = (
    Option("file", "FILE", Path, argument=True, required=True, metavar="FILE",
           help="A snapshot pickle (torch.cuda.memory._dump_snapshot, or written on OOM by "
                "gpu_audit.monitor)."),
    json_option("the summary", "gpu-audit.snapshot/1"),
    out_option("the markdown report, its JSON twin and the plot"),
    Option("no_report", "--no-report", bool, False, help="Do not write report files or the plot."),
    Option("top", "--top", int, 10, min=1, max=1000, metavar="N",
           help="How many of the biggest allocations and sites to list."),
)


@command("snapshot", OPTIONS)
def snapshot(*, file: Path, json_out: bool, out: Path | None, no_report: bool, top: int) -> int:
    """Summarise a PyTorch memory snapshot: segments, free blocks, fragmentation, the biggest
    allocations and where they were made, and memory over the recorded history (a PNG plot).

    Only plain data is unpickled, so a snapshot from someone else cannot run code.

    Exit 0 when summarised, 3 when the file cannot be read.
    """
    from gpu_audit.serial import dumps, write_atomic
    from gpu_audit.snapshot import load_snapshot, summarize
    from gpu_audit.snapshot.render import render_markdown, snapshot_document
    from gpu_audit.units import utc_now

    data = load_snapshot(file)  # its errors name the file
    try:
        summary = summarize(data, top=top)
    except InputError as exc:  # the summary names where in the snapshot; add which file
        raise InputError(f"{file}: {exc}") from None
    generated_at = utc_now()
    source = {"path": str(file), "size_bytes": file.stat().st_size}
    plot_name = None
    written = []
    if not no_report:
        from gpu_audit.report.files import unique_stem
        from gpu_audit.snapshot.plot import PlotUnavailable, has_history, plot_history

        folder = out or Path("reports")
        stem = unique_stem(folder, "snapshot", generated_at, socket.gethostname(),
                           (".md", ".json", ".png"))
        try:
            if has_history(summary):
                try:
                    png = plot_history(summary, folder / f"{stem}.png", title=file.name)
                except PlotUnavailable as exc:
                    err(str(exc))
                else:
                    plot_name = png.name if png else None
                    written.append(png)
            document = snapshot_document(summary, generated_at=generated_at, source=source,
                                         plot=plot_name)
            written.append(write_atomic(folder / f"{stem}.json", dumps(document) + "\n"))
            markdown = render_markdown(summary, title=f"Memory snapshot {file.name}",
                                       generated_at=generated_at, source=str(file),
                                       plot=plot_name)
            written.append(write_atomic(folder / f"{stem}.md", markdown))
        except OSError as exc:
            message = f"cannot write the report to {folder}: {exc.strerror or exc}"
            if out is not None:
                raise UsageError(message + " (pass a writable --out DIR)") from None
            err(message + "; pass --out DIR or --no-report")

    if json_out:
        document = snapshot_document(summary, generated_at=generated_at, source=source,
                                     plot=plot_name)
        sys.stdout.write(dumps(document) + "\n")
    else:
        from gpu_audit.report.terminal import make_console
        from gpu_audit.snapshot.render import render_terminal

        render_terminal(summary, make_console(), source=str(file))
    for path in written:
        if path is not None:
            print(f"wrote {path}", file=sys.stderr)
    return 0
