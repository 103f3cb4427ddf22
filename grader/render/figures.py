"""Small shared pieces of rendering: matplotlib figures as inline PNGs, percentages."""

from __future__ import annotations

import base64
import io


def pyplot():
    """matplotlib.pyplot on the headless Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_data_uri(fig) -> str:
    """Close `fig` and return it as a data: URI, so reports work offline."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    pyplot().close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def percent(part: float, whole: float) -> float:
    """100·part/whole to one decimal, 0 when there is no whole."""
    return round(100.0 * part / whole, 1) if whole else 0.0
