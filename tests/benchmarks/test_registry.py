import pytest

from rewardlab.benchmarks.items import Benchmark
from rewardlab.benchmarks.registry import BENCHMARKS, benchmark_class, build_benchmark
from rewardlab.errors import BenchmarkError


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_every_listed_benchmark_builds_under_its_own_name(name):
    benchmark = build_benchmark(name)
    assert isinstance(benchmark, Benchmark)
    assert benchmark.name == name


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(BenchmarkError, match=r"unknown benchmark 'rewardbench3'; known: .*rewardbench2"):
        benchmark_class("rewardbench3")


def test_options_are_checked_by_name_and_by_value():
    assert build_benchmark("rewardbench", {"tie_credit": 0.5}).tie_credit == 0.5
    with pytest.raises(BenchmarkError, match=r"rewardbench: unknown option\(s\) tie; accepted: tie_credit"):
        build_benchmark("rewardbench", {"tie": 0.5})
    with pytest.raises(BenchmarkError, match=r"rewardbench: tie_credit must be within \[0, 1\]"):
        build_benchmark("rewardbench", {"tie_credit": 2})
