# source: https://github.com/sgl-project/sglang/issues/2591 (4 nodes, 14 H100s; node 1)
# expect: refused: nodes=4 does not divide the 14 ranks
python3 -m sglang.launch_server --model-path /models/dsv3 --tp 14 --dist-init-addr 10.21.99.116:5000 --nnodes 4 --node-rank 0 --trust-remote-code --enable-torch-compile --host 0.0.0.0 --port 30000 --grammar-backend xgrammar
