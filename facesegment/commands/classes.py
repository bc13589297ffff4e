"""``facesegment classes``: the class ids, names and colours (the overlays' key)."""

from ..atomic import check_output_path
from ..bounds import arg_type
from ..classes import CLASS_COLORS, CLASS_NAMES, class_table, legend_image
from ..data.imageio import write_png_atomic

HELP = "list the class ids, names and colours (the palette of the label and overlay PNGs)"
DESCRIPTION = """\
List the classes every model segments into: id (the value in NAME_label.png),
name ("left"/"right" are the image's left and right) and colour, as hex and
RGB. The colours are the palette of the paletted label PNGs and the colours
of the overlays and of the key drawn on them. --legend FILE.png also writes
that key as an image (the README's legend is made this way).

examples:
  facesegment classes
  facesegment classes --legend docs/legend.png
"""


def add_arguments(p):
    """Add the options of ``facesegment classes`` to its sub-parser.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The sub-parser of ``classes``.
    """
    p.add_argument("--legend", metavar="FILE.png", default=None,
                   help="also write the class key as a PNG (written atomically)")
    p.add_argument("--scale", type=arg_type("legend_scale", "--scale"), default=0.6,
                   metavar="S", help="text scale of the --legend image (0.2..4, default 0.6)")


def run(args):
    """Print the class table; with ``--legend``, also write the class key as a PNG.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``facesegment classes`` (see :func:`add_arguments`).

    Returns
    -------
    int
        The exit status: 0.

    Raises
    ------
    DataError
        When the ``--legend`` path may not be written (checked before printing).
    """
    if args.legend:
        check_output_path(args.legend, "class key")
    print(f"{'id':>2}  {'name':<14} {'colour':<8} rgb")
    for i, name, hexa, rgb in class_table(CLASS_NAMES, CLASS_COLORS):
        print(f"{i:>2}  {name:<14} {hexa:<8} {rgb[0]},{rgb[1]},{rgb[2]}")
    if args.legend:
        write_png_atomic(args.legend, legend_image(scale=args.scale))
        print(f"class key written to {args.legend}")
    return 0
