"""mkdocs hook: the figures the pages show live beside the results that made them (experiments/*/,
benchmarks/results/*/), outside docs/; they are added to the site under the same paths, so a page
links `experiments/01-roofline/roofline.png` and the strict build checks that the file exists."""

from pathlib import Path

from mkdocs.structure.files import File

FIGURES = ("experiments/*/*.png", "benchmarks/results/*/*.png")


def on_files(files, config):
    root = Path(config["config_file_path"]).parent
    for pattern in FIGURES:
        for png in sorted(root.glob(pattern)):
            files.append(File(png.relative_to(root).as_posix(), str(root), config["site_dir"],
                              config["use_directory_urls"]))
    return files
