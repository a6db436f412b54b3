"""The main job's entry point runs and prints its tables."""
from streamfit.__main__ import main


def test_main_job_prints_a_table(capsys):
    assert main(["--only", "regret", "--seeds", "1"]) == 0
    out = capsys.readouterr().out
    assert "Figure 9" in out and "statistical_regret" in out
    # five checkpoints, each a row of numbers
    rows = [line.split()[0] for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert rows == ["1000", "3000", "10000", "30000", "100000"]


def test_main_job_runs_a_pca_experiment(capsys):
    assert main(["--only", "pca-dense", "--seeds", "1"]) == 0
    out = capsys.readouterr().out
    assert "dense instances" in out and "fpl_regret" in out
    # one seed, three checkpoints
    assert sum(line.split()[:1] == ["0"] for line in out.splitlines()) == 3
