"""`batchscale upload` / `submit`: what is refused before any connection.

Everything that talks to a server (the real kfp.Client against the KFP REST stand-in,
tests/stand_ins/kfp_rest.py) is in tests/integration/test_kfp_publish_stand_in.py.
"""

import pytest

from batchscale.cli.main import main as cli


def test_unknown_preset_is_refused_by_argparse(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli(["upload", "--preset", "nvidia-k80", "--host", "http://127.0.0.1:9"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'nvidia-k80'" in capsys.readouterr().err
