"""python -m tileops doctor | demo"""
import sys


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv.pop(0) if argv else "help"
    if cmd == "doctor":
        from .doctor import main as doctor

        return doctor(argv)
    if cmd == "demo":
        from .demo import main as demo

        return demo(argv)
    print("usage: python -m tileops {doctor [--json] | demo [--quick]}")
    return 0 if cmd in ("help", "-h", "--help") else 2


if __name__ == "__main__":
    sys.exit(main())
