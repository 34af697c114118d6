// Common shell of every page: the stylesheet and the small-screen navigation toggle.
import "../styles/app.css";

const toggle = document.querySelector<HTMLButtonElement>("[data-nav-toggle]");
const nav = document.getElementById("sidebar");
if (toggle !== null && nav !== null) {
  toggle.addEventListener("click", () => {
    const open = nav.classList.toggle("open");
    toggle.setAttribute("aria-expanded", String(open));
  });
}
document.documentElement.dataset.bundle = "ready";
