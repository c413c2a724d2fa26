"""A wrapper around the fake run_script.py that changes one value: -ms 8 becomes -ms 9."""
import os
import runpy
import sys

args = sys.argv[1:]
at = args.index("-ms")
args[at + 1] = str(int(args[at + 1]) + 1)
script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_script.py")
sys.argv = [script] + args
runpy.run_path(script, run_name="__main__")
