"""The start of the nginx configuration the benchmarks share: one worker in
the foreground, its files in the run's directory, no access log. A benchmark
adds its own http-level lines and server block and closes the http block;
the whole is formatted with dir= and the benchmark's own fields."""

NGINX_HEAD = """worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {dir}; proxy_temp_path {dir}; fastcgi_temp_path {dir};
  uwsgi_temp_path {dir}; scgi_temp_path {dir};
"""
