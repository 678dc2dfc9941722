"""Reading runs from S3 and S3-compatible stores (MinIO, Ceph RGW): ``s3://bucket/prefix``.

Responsible for mirroring the files the analysis reads — ``run.json``, ``requests/*.parquet``,
``client-metrics.parquet`` and ``server-metrics.parquet`` of every run directory under a
prefix — into a local cache, and for turning S3 failures into one-sentence
:class:`~loadgen_analysis.errors.RunLoadError`\\ s. The mirror is then read by :mod:`.load`
like any local folder, so every reduction stays in DuckDB over local Parquet files (DuckDB's
httpfs extension is not needed). Not responsible for writing runs to S3 (``loadgen run --out
s3://…`` does that); a history store's files (:mod:`..history.store`) are mirrored the same
way, with :func:`mirror_files`.

Configuration is the standard AWS one: credentials from the AWS default chain (environment,
``AWS_PROFILE`` and ``~/.aws``, web identity, container or instance role — pyarrow's AWS SDK
resolves it), the endpoint of an S3-compatible store from ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL``, the region from ``AWS_REGION`` or ``AWS_DEFAULT_REGION``. The cache is
``$LOADGEN_CACHE_DIR`` or ``$XDG_CACHE_HOME/loadgen`` (``~/.cache/loadgen``), under
``s3/<endpoint>/<bucket>/<prefix>``; a file already there with the remote size and modification
time is not downloaded again, and cached files deleted remotely are removed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..errors import RunLoadError
from . import contract

if TYPE_CHECKING:
    import pyarrow.fs as pafs

#: What to install for ``s3://``: pyarrow's S3 filesystem is the one this module speaks, and
#: the plain install leaves pyarrow out (it alone was a quarter of the install; issue 61).
EXTRA_HINT = "pip install './[s3]'"

#: Downloads in parallel: segments are small and many, so latency, not bandwidth, dominates.
DOWNLOAD_THREADS = 8

_CHUNK_BYTES = 1 << 20


def normalise_url(url: str) -> str:
    """``s3://bucket/prefix/`` → ``s3://bucket/prefix``; RunLoadError when there is no bucket."""
    bucket, prefix = parse_url(url)
    return f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"


def parse_url(url: str) -> tuple[str, str]:
    """(bucket, prefix without leading or trailing slashes) of an ``s3://`` URL."""
    if url[:5].lower() != "s3://":
        raise RunLoadError(f"{url}: not an s3:// URL; write s3://BUCKET/PREFIX")
    bucket, _, prefix = url[5:].partition("/")
    if not bucket:
        raise RunLoadError(f"{url}: no bucket name; write s3://BUCKET/PREFIX")
    return bucket, prefix.strip("/")


def endpoint_url() -> str | None:
    """The S3-compatible endpoint from the environment, or None for AWS itself."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def _pyarrow_fs() -> Any:
    """``pyarrow.fs``, or one sentence naming the extra that brings it."""
    try:
        import pyarrow.fs
    except ModuleNotFoundError:
        raise RunLoadError(
            f"s3:// needs pyarrow's S3 filesystem, which this install left out; install the "
            f"s3 extra: {EXTRA_HINT} (or pip install 'loadgen-analysis[s3]')"
        ) from None
    return pyarrow.fs


def filesystem() -> pafs.S3FileSystem:
    """A pyarrow S3 filesystem configured from the standard AWS environment (module docs)."""
    pafs = _pyarrow_fs()
    kwargs: dict[str, object] = {
        "connect_timeout": 5.0,
        "request_timeout": 30.0,
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=3),
    }
    endpoint = endpoint_url()
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        kwargs["endpoint_override"] = parts.netloc
        kwargs["scheme"] = parts.scheme or "https"
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        kwargs["region"] = region
    return pafs.S3FileSystem(**kwargs)


def cache_root() -> Path:
    """Where mirrored prefixes live: ``$LOADGEN_CACHE_DIR`` or ``$XDG_CACHE_HOME/loadgen``."""
    configured = os.environ.get("LOADGEN_CACHE_DIR")
    if configured:
        return Path(configured)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "loadgen"


def _endpoint_key() -> str:
    endpoint = endpoint_url()
    if not endpoint:
        return "aws"
    netloc = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}").netloc
    return re.sub(r"[^A-Za-z0-9.-]+", "_", netloc) or "endpoint"


def _wanted(rel: PurePosixPath) -> bool:
    """The files of a run directory the analysis reads (never a ``.partial`` segment)."""
    name = rel.name
    if name.startswith("."):
        return False
    if name in ("run.json", "client-metrics.parquet", "server-metrics.parquet"):
        return True
    return rel.parent.name == "requests" and contract.is_segment(name)


def _credentials_visible() -> bool:
    """Whether any source of the AWS default credential chain is visible from here (an
    instance or pod role is not, so a False is only a hint)."""
    env = (
        "AWS_ACCESS_KEY_ID",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    )
    if any(os.environ.get(name) for name in env):
        return True
    home = Path.home() / ".aws"
    files = (
        os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or home / "credentials",
        os.environ.get("AWS_CONFIG_FILE") or home / "config",
    )
    return any(Path(f).is_file() for f in files)


def explain(url: str, exc: BaseException) -> RunLoadError:
    """One sentence naming the URL, what went wrong and the fix."""
    text = str(exc)
    upper = text.upper()
    bucket, _ = parse_url(url)
    if "NO_SUCH_BUCKET" in upper or "NOSUCHBUCKET" in upper:
        where = f" at {endpoint_url()}" if endpoint_url() else ""
        message = (
            f"{url}: bucket '{bucket}' does not exist{where}; check the bucket name "
            "(and AWS_ENDPOINT_URL for an S3-compatible store)"
        )
    elif any(
        marker in upper
        for marker in (
            "ACCESS_DENIED",
            "ACCESSDENIED",
            "INVALID_ACCESS_KEY_ID",
            "INVALIDACCESSKEYID",
            "SIGNATURE_DOES_NOT_MATCH",
            "SIGNATUREDOESNOTMATCH",
            "EXPIRED",
            "HTTP RESPONSE CODE: 403",
            "CREDENTIALS",
        )
    ):
        if _credentials_visible():
            message = (
                f"{url}: access denied with the AWS credentials found; check that they may "
                "list and read this bucket (and AWS_PROFILE / AWS_REGION)"
            )
        else:
            message = (
                f"{url}: access denied and no AWS credentials were found; set "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or run where an "
                "instance or pod role provides them"
            )
    elif any(
        marker in upper
        for marker in ("NETWORK_CONNECTION", "CURLCODE", "COULD NOT CONNECT", "RESOLVE HOST")
    ):
        endpoint = endpoint_url() or "the AWS S3 endpoint"
        message = (
            f"{url}: cannot reach {endpoint}; check AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3) "
            "and the network"
        )
    else:
        message = f"{url}: cannot read from S3 ({text.strip()})"
    error = RunLoadError(message)
    error.__cause__ = exc
    return error


def _listing(fs: pafs.S3FileSystem, url: str) -> list[pafs.FileInfo]:
    pafs = _pyarrow_fs()
    bucket, prefix = parse_url(url)
    base = f"{bucket}/{prefix}" if prefix else bucket
    try:
        infos = fs.get_file_info(pafs.FileSelector(base, recursive=True))
    except FileNotFoundError:
        infos = []
    except OSError as exc:
        raise explain(url, exc) from exc
    return [i for i in infos if i.type == pafs.FileType.File]


def _download(fs: pafs.S3FileSystem, source: str, dest: Path, mtime_ns: int | None) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    # Written beside the destination and renamed: a reader never sees half a file, and two
    # processes mirroring the same prefix do not clash.
    temp = dest.with_name(f".{dest.name}.{os.getpid()}.download")
    try:
        with fs.open_input_stream(source) as remote, temp.open("wb") as local:
            while chunk := remote.read(_CHUNK_BYTES):
                local.write(chunk)
        if mtime_ns is not None:
            os.utime(temp, ns=(mtime_ns, mtime_ns))
        temp.replace(dest)
    finally:
        temp.unlink(missing_ok=True)


def _cached_files(root: Path, wanted: Callable[[PurePosixPath], bool]) -> Iterator[Path]:
    if root.is_dir():
        for path in root.rglob("*"):
            if path.is_file() and wanted(PurePosixPath(path.relative_to(root).as_posix())):
                yield path


def mirror(url: str) -> Path:
    """Mirror the run files under ``url`` into the local cache and return the local folder
    that stands for ``url`` (a run directory, or a folder of them).

    Raises :class:`~loadgen_analysis.errors.RunLoadError` naming the URL and the fix when the
    bucket does not exist, nothing of a run is under the prefix, access is denied, or the
    endpoint cannot be reached.
    """
    nothing = "no loadgen run under this prefix (no run.json or requests/*.parquet)"
    return mirror_files(url, _wanted, nothing)


def mirror_files(url: str, wanted: Callable[[PurePosixPath], bool], nothing: str) -> Path:
    """Mirror the files under ``url`` whose path relative to it is ``wanted`` into the local
    cache (as :func:`mirror`); ``nothing`` says what was looked for when none is there."""
    url = normalise_url(url)
    bucket, prefix = parse_url(url)
    _pyarrow_fs()  # the extra's absence said as itself, not as an S3 failure
    try:
        fs = filesystem()
    except (OSError, ValueError) as exc:
        raise explain(url, exc) from exc
    base = f"{bucket}/{prefix}" if prefix else bucket
    remote: dict[PurePosixPath, pafs.FileInfo] = {}
    for info in _listing(fs, url):
        rel = PurePosixPath(info.path[len(base) :].lstrip("/"))
        if wanted(rel):
            remote[rel] = info
    if not remote:
        raise RunLoadError(f"{url}: {nothing}; check the prefix, e.g. with `aws s3 ls {url}/`")
    root = cache_root() / "s3" / _endpoint_key() / bucket / prefix
    todo = []
    for rel, info in remote.items():
        dest = root / rel
        if dest.is_file():
            stat = dest.stat()
            if stat.st_size == info.size and (
                info.mtime_ns is None or stat.st_mtime_ns == info.mtime_ns
            ):
                continue
        todo.append((info.path, dest, info.mtime_ns))
    try:
        with ThreadPoolExecutor(max_workers=DOWNLOAD_THREADS) as pool:
            for future in [pool.submit(_download, fs, *job) for job in todo]:
                future.result()
    except OSError as exc:
        raise explain(url, exc) from exc
    present = {root / rel for rel in remote}
    for path in list(_cached_files(root, wanted)):
        if path not in present:
            path.unlink()  # deleted remotely: a stale segment would add rows that no longer exist
    # Folders emptied by that go too: an empty requests/ would still look like a run.
    for folder in sorted((p for p in root.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    return root


def upload(local: Path, url: str) -> None:
    """One PUT of the file ``local`` to ``url`` (``s3://bucket/key``): atomic on S3, so a
    reader never sees half a file; an S3 failure is one sentence (:func:`explain`)."""
    bucket, key = parse_url(url)
    _pyarrow_fs()
    try:
        fs = filesystem()
        with local.open("rb") as source, fs.open_output_stream(f"{bucket}/{key}") as remote:
            while chunk := source.read(_CHUNK_BYTES):
                remote.write(chunk)
    except (OSError, ValueError) as exc:
        raise explain(url, exc) from exc
