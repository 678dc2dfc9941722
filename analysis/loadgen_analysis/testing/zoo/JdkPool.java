// The zoo's JVM server: the JDK's own com.sun.net.httpserver with a fixed pool of THREADS
// (args[0], 8) threads, each request holding one for SLEEP_MS (args[1], 10) and answering a
// 3-byte body. Its sockets keep Nagle's algorithm on (the JDK server never sets
// TCP_NODELAY), so a small body written after the headers can wait for the client's delayed
// ACK. /stats is its own counter (requests answered). Prints "listening on URL".
import com.sun.net.httpserver.HttpServer;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;

public class JdkPool {
    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 8;
        long sleepMs = args.length > 1 ? Long.parseLong(args[1]) : 10;
        AtomicLong requests = new AtomicLong();
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 1024);
        server.createContext("/stats", ex -> {
            byte[] body = ("{\"requests\": " + requests.get() + "}").getBytes(StandardCharsets.UTF_8);
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream out = ex.getResponseBody()) { out.write(body); }
        });
        server.createContext("/", ex -> {
            try { Thread.sleep(sleepMs); } catch (InterruptedException e) { return; }
            byte[] body = "ok\n".getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().set("Content-Type", "text/plain");
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream out = ex.getResponseBody()) { out.write(body); }
            requests.incrementAndGet();
        });
        server.setExecutor(Executors.newFixedThreadPool(threads));
        server.start();
        System.out.println("listening on http://127.0.0.1:" + server.getAddress().getPort());
        System.out.flush();
    }
}
