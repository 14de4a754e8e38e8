"""`python3 -m surfer.bench ...`: the same commands as `surfer bench ...`."""

from surfer.bench.commands import bench_app


def main() -> None:
    bench_app()(prog_name="surfer bench")


if __name__ == "__main__":
    main()
